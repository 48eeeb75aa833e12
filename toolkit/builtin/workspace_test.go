package builtin

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWorkspaceClean(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "ws")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	alias := filepath.Join(base, "alias")
	if err := os.Symlink(dir, alias); err != nil {
		t.Fatal(err)
	}
	ws, err := OpenWorkspace(alias)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ws.Dir() != real {
		t.Fatalf("Dir() = %s, want %s", ws.Dir(), real)
	}

	tests := []struct {
		name    string
		in      string
		want    string
		outside bool // want ErrOutsideWorkspace
		bad     bool // want another error
	}{
		{name: "relative", in: "a/b.txt", want: "a/b.txt"},
		{name: "dot segments", in: "./a//c/../b.txt/", want: "a/b.txt"},
		{name: "root", in: ".", want: "."},
		{name: "absolute inside", in: filepath.Join(real, "x", "y.go"), want: "x/y.go"},
		{name: "absolute root", in: real, want: "."},
		{name: "absolute through the alias", in: filepath.Join(alias, "z"), want: "z"},
		{name: "inner dotdot", in: "a/../b", want: "b"},
		{name: "dotdot", in: "../x", outside: true},
		{name: "dotdot after a dir", in: "a/../../x", outside: true},
		{name: "bare dotdot", in: "..", outside: true},
		{name: "absolute outside", in: "/etc/passwd", outside: true},
		{name: "absolute sibling with common prefix", in: real + "-other/f", outside: true},
		{name: "absolute escaping with dotdot", in: filepath.Join(real, "..", "x"), outside: true},
		{name: "empty", in: "", bad: true},
		{name: "NUL byte", in: "a\x00b", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ws.Clean(tt.in)
			switch {
			case tt.outside:
				if !errors.Is(err, ErrOutsideWorkspace) {
					t.Fatalf("Clean(%q) = %q, %v; want ErrOutsideWorkspace", tt.in, got, err)
				}
				wantErr(t, err, "is outside the workspace")
			case tt.bad:
				if err == nil || errors.Is(err, ErrOutsideWorkspace) {
					t.Fatalf("Clean(%q) = %q, %v; want a plain error", tt.in, got, err)
				}
			case err != nil:
				t.Fatalf("Clean(%q): %v", tt.in, err)
			case got != tt.want:
				t.Fatalf("Clean(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestOpenWorkspaceMissingDir(t *testing.T) {
	if _, err := OpenWorkspace(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Fatal("OpenWorkspace of a missing directory succeeded")
	}
}
