package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func jsonArgs(t *testing.T, v map[string]any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPathEscapesRefused calls every file tool (and run_command's cwd) with
// every way out of the workspace and checks that each is refused and that
// nothing outside changed.
func TestPathEscapesRefused(t *testing.T) {
	e := newTestEnv(t)
	secret := filepath.Join(e.outside, "secret.txt")
	must(t, os.Symlink(secret, e.path("link.txt")))
	must(t, os.Symlink(e.outside, e.path("linkdir")))
	must(t, os.Symlink("linkdir", e.path("chain")))
	must(t, os.Mkdir(e.path("sub"), 0o755))
	must(t, os.Symlink("../../outside", e.path("sub/up")))

	escapes := []struct {
		name string
		file string // a file path that leads outside
		dir  string // a directory path that leads outside
	}{
		{name: "dotdot", file: "../outside/secret.txt", dir: "../outside"},
		{name: "dotdot inside a path", file: "sub/../../outside/secret.txt", dir: "sub/../.."},
		{name: "absolute outside", file: secret, dir: e.outside},
		{name: "symlink to an outside file", file: "link.txt", dir: "link.txt"},
		{name: "symlink to an outside dir", file: "linkdir/secret.txt", dir: "linkdir"},
		{name: "new file under a symlinked dir", file: "linkdir/new.txt", dir: "linkdir/"},
		{name: "symlink chain", file: "chain/secret.txt", dir: "chain"},
		{name: "relative symlink climbing out", file: "sub/up/secret.txt", dir: "sub/up"},
	}
	calls := []struct {
		tool string
		args func(file, dir string) map[string]any
	}{
		{"read_files", func(f, _ string) map[string]any { return map[string]any{"paths": []string{f}} }},
		{"find_files", func(_, d string) map[string]any { return map[string]any{"pattern": "*", "path": d} }},
		{"edit_file", func(f, _ string) map[string]any { return map[string]any{"path": f, "content": "pwned"} }},
		{"edit_file", func(f, _ string) map[string]any {
			return map[string]any{"path": f, "old_string": "secret", "new_string": "pwned"}
		}},
		{"remove_file", func(f, _ string) map[string]any { return map[string]any{"path": f} }},
		{"restore_file", func(f, _ string) map[string]any { return map[string]any{"path": f} }},
		{"file_history", func(f, _ string) map[string]any { return map[string]any{"path": f} }},
		{"run_command", func(_, d string) map[string]any { return map[string]any{"argv": []string{"pwd"}, "cwd": d} }},
	}
	for _, esc := range escapes {
		// A kept version makes restore_file reach the file system instead
		// of stopping at "no versions".
		if rel, err := e.ws.Clean(esc.file); err == nil {
			_, err := e.versions.SaveFileVersion(context.Background(), e.ws.Dir(), rel, []byte("pwned"), false, "test")
			must(t, err)
		}
		for _, c := range calls {
			args := jsonArgs(t, c.args(esc.file, esc.dir))
			t.Run(esc.name+"/"+c.tool, func(t *testing.T) {
				out, err := e.call(c.tool, args)
				if err == nil {
					t.Fatalf("%s %s succeeded:\n%s", c.tool, args, out)
				}
				wantErr(t, err, "outside the workspace")
				if !errors.Is(err, ErrOutsideWorkspace) {
					t.Fatalf("error %v does not match ErrOutsideWorkspace", err)
				}
			})
		}
	}
	if got, _ := os.ReadFile(secret); string(got) != "secret\n" {
		t.Fatalf("outside file changed: %q", got)
	}
	if _, err := os.Stat(filepath.Join(e.outside, "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("a file was created outside the workspace: %v", err)
	}
}

// TestSymlinkSwappedAfterCheck replaces a directory and a file that were
// read once with symlinks to the outside: the next calls must be refused.
func TestSymlinkSwappedAfterCheck(t *testing.T) {
	e := newTestEnv(t)
	e.write("data/secret.txt", "inside\n")
	e.write("f.txt", "inside\n")
	out, err := e.call("read_files", `{"paths":["data/secret.txt","f.txt"]}`)
	wantContent(t, out, err, "inside")

	must(t, os.RemoveAll(e.path("data")))
	must(t, os.Symlink(e.outside, e.path("data")))
	must(t, os.Remove(e.path("f.txt")))
	must(t, os.Symlink(filepath.Join(e.outside, "secret.txt"), e.path("f.txt")))

	for _, tc := range []struct{ tool, args string }{
		{"read_files", `{"paths":["data/secret.txt"]}`},
		{"read_files", `{"paths":["f.txt"]}`},
		{"edit_file", `{"path":"data/secret.txt","content":"pwned"}`},
		{"edit_file", `{"path":"f.txt","old_string":"secret","new_string":"pwned"}`},
		{"remove_file", `{"path":"data/secret.txt"}`},
		{"find_files", `{"pattern":"*","path":"data"}`},
	} {
		t.Run(tc.tool+" "+tc.args, func(t *testing.T) {
			out, err := e.call(tc.tool, tc.args)
			if err == nil {
				t.Fatalf("succeeded after the swap:\n%s", out)
			}
			wantErr(t, err, "outside the workspace")
		})
	}
	if got, _ := os.ReadFile(filepath.Join(e.outside, "secret.txt")); string(got) != "secret\n" {
		t.Fatalf("outside file changed: %q", got)
	}
}

// TestSymlinkSwapRace flips a symlink between an inside and an outside
// target while read_files reads through it: no read may see the outside.
func TestSymlinkSwapRace(t *testing.T) {
	e := newTestEnv(t)
	e.write("real/secret.txt", "inside\n")
	must(t, os.Symlink("real", e.path("sw")))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		targets := []string{e.outside, "real"}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tmp := e.path("sw.tmp")
			_ = os.Remove(tmp)
			if err := os.Symlink(targets[i%2], tmp); err != nil {
				t.Error(err)
				return
			}
			if err := os.Rename(tmp, e.path("sw")); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var inside, refused int
	for range 300 {
		out, err := e.call("read_files", `{"paths":["sw/secret.txt"]}`)
		if err == nil {
			inside++
		} else {
			refused++
		}
		if strings.Contains(out, "secret\n") && !strings.Contains(out, "inside") {
			t.Errorf("read the outside file through a swapped symlink:\n%s", out)
			break
		}
		if err != nil && !strings.Contains(err.Error(), "outside the workspace") && !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("unexpected error: %v", err)
			break
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d reads inside, %d refused", inside, refused)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
