package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantPos  []string
		wantFlag string
	}{
		{name: "flags first", args: []string{"--x", "1", "file"}, wantPos: []string{"file"}, wantFlag: "1"},
		{name: "flags after the file", args: []string{"file", "--x=2"}, wantPos: []string{"file"}, wantFlag: "2"},
		{name: "stdin dash", args: []string{"-", "-x", "3"}, wantPos: []string{"-"}, wantFlag: "3"},
		{name: "double dash ends flags", args: []string{"--", "--x"}, wantPos: []string{"--x"}, wantFlag: ""},
		{name: "nothing", args: nil, wantPos: nil, wantFlag: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			x := fs.String("x", "", "")
			pos, err := parseInterspersed(fs, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantPos, pos); diff != "" {
				t.Errorf("positional (-want +got):\n%s", diff)
			}
			if *x != tt.wantFlag {
				t.Errorf("x = %q, want %q", *x, tt.wantFlag)
			}
		})
	}
}

// testEnv returns an env with no terminal and no signals, and its output
// buffers.
func testEnv(stdin io.Reader) (*env, *lockedBuffer, *lockedBuffer) {
	var stdout, stderr lockedBuffer
	return &env{stdin: stdin, stdout: &stdout, stderr: &stderr, getwd: func() (string, error) { return "/nonexistent", nil }},
		&stdout, &stderr
}

func TestUsageErrors(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr []string
	}{
		{name: "no command", args: nil, wantCode: exitUsage, wantStderr: []string{"Usage:"}},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: exitUsage, wantStderr: []string{`unknown command "frobnicate"`, "Usage:"}},
		{name: "serve on a public address without a token", args: []string{"serve", "--addr", "0.0.0.0:0"}, wantCode: exitUsage, wantStderr: []string{"--addr 0.0.0.0:0"}},
		{name: "unknown flag", args: []string{"run", "--bogus"}, wantCode: exitUsage, wantStderr: []string{"unknown flag --bogus", `"tooldispatch run --help" lists its flags`}},
		{name: "flag of another command", args: []string{"session", "--all"}, wantCode: exitUsage, wantStderr: []string{"--all is a flag of tools, not of session"}},
		{name: "bad approve", args: []string{"run", "--approve", "maybe"}, wantCode: exitUsage, wantStderr: []string{"--approve must be ask, all or none"}},
		{name: "bad log level", args: []string{"tools", "--log-level", "loud"}, wantCode: exitUsage, wantStderr: []string{"--log-level"}},
		{name: "negative concurrency", args: []string{"run", "--max-concurrency", "-1"}, wantCode: exitUsage, wantStderr: []string{"--max-concurrency"}},
		{name: "two files", args: []string{"run", "a", "b"}, wantCode: exitUsage, wantStderr: []string{`unexpected argument "b"`}},
		{name: "argument to tools", args: []string{"tools", "x"}, wantCode: exitUsage, wantStderr: []string{`unexpected argument "x"`}},
		{name: "empty session", args: []string{"session", "--session", ""}, wantCode: exitUsage, wantStderr: []string{"--session"}},
		{name: "missing workspace", args: []string{"tools"}, wantCode: exitUsage, wantStderr: []string{"--workspace"}},
		{name: "workspace is a file", args: []string{"tools", "--workspace", filepath.Join(ws, "f")}, wantCode: exitUsage, wantStderr: []string{"is not a directory"}},
		{name: "missing input file", args: []string{"run", "--workspace", ws, filepath.Join(ws, "nope.jsonl")}, wantCode: exitInput, wantStderr: []string{"reading turns"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _, stderr := testEnv(strings.NewReader(""))
			if got := e.main(tt.args); got != tt.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", got, tt.wantCode, stderr.String())
			}
			for _, s := range tt.wantStderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr does not contain %q:\n%s", s, stderr.String())
				}
			}
		})
	}
}

func TestHelpCommand(t *testing.T) {
	e, stdout, _ := testEnv(strings.NewReader(""))
	if got := e.main([]string{"help"}); got != exitOK {
		t.Fatalf("exit status %d", got)
	}
	for _, s := range []string{"tooldispatch run", "tooldispatch tools", "tooldispatch session"} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("usage does not contain %q", s)
		}
	}
	if !strings.Contains(stdout.String(), "tooldispatch serve") {
		t.Error("usage does not list serve")
	}
}

func TestRunIDsDiffer(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := newRunID(fixedTime)
		if seen[id] || !strings.HasPrefix(id, "run-") {
			t.Fatalf("run id %q repeated or malformed", id)
		}
		seen[id] = true
	}
}
