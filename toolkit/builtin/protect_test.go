package builtin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// ownFilesLayout is tooldispatch's own files laid out for a test: a data
// directory with a Badger-like LOCK and a secret key, and a configuration
// file.
type ownFilesLayout struct {
	data, key, config string
}

func makeOwnFiles(t *testing.T, data, config string) ownFilesLayout {
	t.Helper()
	must(t, os.MkdirAll(data, 0o700))
	l := ownFilesLayout{data: data, key: filepath.Join(data, "secret.key"), config: config}
	writeFile(t, l.key, "AES-KEY-BYTES")
	writeFile(t, filepath.Join(data, "LOCK"), "LOCKED")
	writeFile(t, filepath.Join(data, "MANIFEST"), "STORE")
	if config != "" {
		must(t, os.MkdirAll(filepath.Dir(config), 0o755))
		writeFile(t, config, "[web]\nOPERATOR-CONFIG = 1\n")
	}
	return l
}

// intact fails unless the layout's files hold what makeOwnFiles wrote.
func (l ownFilesLayout) intact(t *testing.T) {
	t.Helper()
	for p, want := range map[string]string{l.key: "AES-KEY-BYTES", filepath.Join(l.data, "LOCK"): "LOCKED", filepath.Join(l.data, "MANIFEST"): "STORE"} {
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	if l.config != "" {
		if b, err := os.ReadFile(l.config); err != nil || !strings.Contains(string(b), "OPERATOR-CONFIG") {
			t.Errorf("%s = %q, %v", l.config, b, err)
		}
	}
	entries, _ := os.ReadDir(l.data)
	if len(entries) != 3 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("data directory holds %v, want LOCK, MANIFEST and secret.key only", names)
	}
}

// ownFileLeaks are texts of the layout that no tool result may carry.
var ownFileLeaks = []string{"AES-KEY-BYTES", "LOCKED", "STORE", "OPERATOR-CONFIG", "secret.key", "MANIFEST"}

// refusedCall runs a tool and fails unless it returns an error and its
// output shows none of the own files' content or names.
func (e *testEnv) refusedCall(t *testing.T, tool, args string) error {
	t.Helper()
	out, err := e.call(tool, args)
	if err == nil {
		t.Errorf("%s %s succeeded:\n%s", tool, args, out)
		return nil
	}
	for _, s := range ownFileLeaks {
		if strings.Contains(out, s) {
			t.Errorf("%s %s shows %q:\n%s", tool, args, s, out)
		}
	}
	return err
}

// TestOldDataDirOutOfReach: a data directory left in the workspace's
// .tooldispatch (the old default) is out of every file tool's reach, by
// its own name and through a symlink; find_files lists nothing of it.
func TestOldDataDirOutOfReach(t *testing.T) {
	e := newTestEnv(t)
	own := makeOwnFiles(t, e.path(".tooldispatch"), "")
	must(t, os.Symlink(".tooldispatch", e.path("dd")))
	must(t, os.Symlink(".tooldispatch/secret.key", e.path("k")))
	for _, rel := range []string{".tooldispatch/secret.key", "dd/secret.key", "dd/LOCK"} {
		_, err := e.versions.SaveFileVersion(context.Background(), e.ws.Dir(), rel, []byte("pwned"), false, "test")
		must(t, err)
	}
	for _, tc := range []struct{ name, tool, args string }{
		{"read the key", "read_files", `{"paths":[".tooldispatch/secret.key"]}`},
		{"read the key through a dir symlink", "read_files", `{"paths":["dd/secret.key"]}`},
		{"read the key through a file symlink", "read_files", `{"paths":["k"]}`},
		{"read the key absolute", "read_files", jsonArgs(t, map[string]any{"paths": []string{own.key}})},
		{"list the data dir through a symlink", "find_files", `{"pattern":"*","path":"dd"}`},
		{"list the data dir", "find_files", `{"pattern":"*","path":".tooldispatch"}`},
		{"edit the key through a symlink", "edit_file", `{"path":"dd/secret.key","content":"pwned"}`},
		{"patch the key through a symlink", "edit_file", `{"path":"dd/secret.key","old_string":"AES","new_string":"pwned"}`},
		{"edit the key through a file symlink", "edit_file", `{"path":"k","content":"pwned"}`},
		{"create a file in the data dir through a symlink", "edit_file", `{"path":"dd/new","content":"pwned"}`},
		{"remove the lock through a symlink", "remove_file", `{"path":"dd/LOCK"}`},
		{"remove the key through a symlink", "remove_file", `{"path":"dd/secret.key"}`},
		{"restore the key through a symlink", "restore_file", `{"path":"dd/secret.key"}`},
		{"run a command in the data dir", "run_command", `{"argv":["cat","secret.key"],"cwd":"dd"}`},
	} {
		t.Run(tc.name, func(t *testing.T) { e.refusedCall(t, tc.tool, tc.args) })
	}
	for _, args := range []string{`{"pattern":"*"}`, `{"pattern":"**/secret.key"}`, `{"pattern":"*LOCK*"}`} {
		out, err := e.call("find_files", args)
		if err != nil {
			t.Fatalf("find_files %s: %v", args, err)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "[") || strings.HasPrefix(line, "no files match") {
				continue
			}
			for _, s := range []string{"secret.key", "LOCK", "MANIFEST"} {
				if strings.Contains(line, s) {
					t.Errorf("find_files %s lists %s:\n%s", args, s, out)
				}
			}
		}
	}
	own.intact(t)
}

// TestHardLinkedFileNotWritten: a file with a second name (a hard link,
// possibly to a file outside the workspace) is never written through.
func TestHardLinkedFileNotWritten(t *testing.T) {
	e := newTestEnv(t)
	outside := filepath.Join(e.outside, "secret.txt")
	if err := os.Link(outside, e.path("hl.txt")); err != nil {
		t.Skipf("hard links not possible here: %v", err)
	}
	_, err := e.versions.SaveFileVersion(context.Background(), e.ws.Dir(), "hl.txt", []byte("pwned"), false, "test")
	must(t, err)
	for _, tc := range []struct{ name, tool, args string }{
		{"edit whole", "edit_file", `{"path":"hl.txt","content":"pwned"}`},
		{"patch", "edit_file", `{"path":"hl.txt","old_string":"secret","new_string":"pwned"}`},
		{"remove", "remove_file", `{"path":"hl.txt"}`},
		{"restore", "restore_file", `{"path":"hl.txt","version":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.call(tc.tool, tc.args)
			wantErr(t, err, "hard links")
		})
	}
	if b, _ := os.ReadFile(outside); string(b) != "secret\n" {
		t.Fatalf("the outside file changed through its hard link: %q", b)
	}
	if _, ok := e.read("hl.txt"); !ok {
		t.Fatal("hl.txt was removed")
	}
	// Reading a hard-linked file is fine: only writes go through to the
	// other names.
	out, err := e.call("read_files", `{"paths":["hl.txt"]}`)
	wantContent(t, out, err, "secret")
}

// newProtectedEnv is newTestEnv with the workspace opened on own's paths as
// protected.
func newProtectedEnv(t *testing.T, setup func(ws, base string) ownFilesLayout) (*testEnv, ownFilesLayout) {
	t.Helper()
	e := newTestEnv(t)
	own := setup(e.dir, filepath.Dir(e.dir))
	ws, err := OpenWorkspace(e.dir, WithProtected(own.data, own.key, own.config))
	must(t, err)
	t.Cleanup(func() { ws.Close() })
	e.ws = ws
	for _, tool := range Tools(Deps{Workspace: ws, Versions: e.versions}) {
		e.tools[tool.Name] = tool
	}
	return e, own
}

// TestProtectedPathsOutOfReach: the data directory, the key and the
// configuration named by WithProtected are refused by every file tool, by
// every path, wherever they lie.
func TestProtectedPathsOutOfReach(t *testing.T) {
	layouts := []struct {
		name  string
		setup func(ws, base string) ownFilesLayout
	}{
		{"data inside the workspace, config inside", func(ws, base string) ownFilesLayout {
			return makeOwnFiles(t, filepath.Join(ws, "state"), filepath.Join(ws, "conf", "tooldispatch.toml"))
		}},
		{"data and config outside the workspace", func(ws, base string) ownFilesLayout {
			return makeOwnFiles(t, filepath.Join(base, "state"), filepath.Join(base, "tooldispatch.toml"))
		}},
	}
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			e, own := newProtectedEnv(t, l.setup)
			must(t, os.Symlink(own.data, e.path("dd")))
			must(t, os.Symlink(own.key, e.path("k")))
			must(t, os.Symlink(own.config, e.path("c.toml")))
			for _, rel := range []string{"dd/secret.key", "dd/LOCK", "k"} {
				_, err := e.versions.SaveFileVersion(context.Background(), e.ws.Dir(), rel, []byte("pwned"), false, "test")
				must(t, err)
			}
			rf := func(p string) string { return jsonArgs(t, map[string]any{"paths": []string{p}}) }
			ed := func(p string) string { return jsonArgs(t, map[string]any{"path": p, "content": "pwned"}) }
			cases := []struct{ name, tool, args string }{
				{"read the key absolute", "read_files", rf(own.key)},
				{"read the key through ..", "read_files", rf("sub/../dd/secret.key")},
				{"read the key through a dir symlink", "read_files", rf("dd/secret.key")},
				{"read the key through a file symlink", "read_files", rf("k")},
				{"read the config through a symlink", "read_files", rf("c.toml")},
				{"read the config absolute", "read_files", rf(own.config)},
				{"read the data dir", "read_files", rf("dd")},
				{"list the data dir through a symlink", "find_files", `{"pattern":"*","path":"dd"}`},
				{"list the data dir absolute", "find_files", jsonArgs(t, map[string]any{"pattern": "*", "path": own.data})},
				{"edit the key through a symlink", "edit_file", ed("dd/secret.key")},
				{"edit the key absolute", "edit_file", ed(own.key)},
				{"edit the config", "edit_file", ed("c.toml")},
				{"create a file in the data dir", "edit_file", ed("dd/new")},
				{"remove the lock", "remove_file", `{"path":"dd/LOCK"}`},
				{"remove the key through a file symlink", "remove_file", `{"path":"k"}`},
				{"restore the key", "restore_file", `{"path":"k"}`},
				{"run a command in the data dir", "run_command", `{"argv":["cat","secret.key"],"cwd":"dd"}`},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					err := e.refusedCall(t, tc.tool, tc.args)
					if err != nil && !errors.Is(err, ErrProtected) && !errors.Is(err, ErrOutsideWorkspace) {
						t.Errorf("error %v matches neither ErrProtected nor ErrOutsideWorkspace", err)
					}
				})
			}
			for _, args := range []string{`{"pattern":"*"}`, `{"pattern":"**/secret.key"}`, `{"pattern":"*.toml"}`} {
				out, err := e.call("find_files", args)
				if err != nil {
					t.Fatalf("find_files %s: %v", args, err)
				}
				for _, line := range strings.Split(out, "\n") {
					if strings.HasPrefix(line, "[") || strings.HasPrefix(line, "no files match") {
						continue
					}
					for _, s := range []string{"secret.key", "LOCK", "MANIFEST", "tooldispatch.toml", "c.toml", "state/"} {
						if strings.Contains(line, s) {
							t.Errorf("find_files %s lists %s:\n%s", args, s, out)
						}
					}
				}
			}
			own.intact(t)
		})
	}
}

// TestProtectedInsideWorkspaceRefusedByName: with the data directory and
// the configuration inside the workspace, their own names are refused
// too, and the refusal says why.
func TestProtectedInsideWorkspaceRefusedByName(t *testing.T) {
	e, own := newProtectedEnv(t, func(ws, _ string) ownFilesLayout {
		return makeOwnFiles(t, filepath.Join(ws, "state"), filepath.Join(ws, "tooldispatch.toml"))
	})
	for _, tc := range []struct{ tool, args string }{
		{"read_files", `{"paths":["state/secret.key"]}`},
		{"read_files", `{"paths":["./state/../state/LOCK"]}`},
		{"read_files", `{"paths":["tooldispatch.toml"]}`},
		{"find_files", `{"pattern":"*","path":"state"}`},
		{"edit_file", `{"path":"state/secret.key","content":"pwned"}`},
		{"edit_file", `{"path":"tooldispatch.toml","content":"pwned"}`},
		{"remove_file", `{"path":"state/LOCK"}`},
	} {
		t.Run(tc.tool+" "+tc.args, func(t *testing.T) {
			err := e.refusedCall(t, tc.tool, tc.args)
			errIsProtected(t, err)
			if err != nil {
				wantErr(t, err, "tooldispatch's own files")
			}
		})
	}
	own.intact(t)
}

// TestHardLinkToProtectedFile: another name of the key inside the
// workspace is refused for reading too (the same device and inode).
func TestHardLinkToProtectedFile(t *testing.T) {
	e, own := newProtectedEnv(t, func(ws, base string) ownFilesLayout {
		return makeOwnFiles(t, filepath.Join(base, "state"), filepath.Join(base, "tooldispatch.toml"))
	})
	if err := os.Link(own.key, e.path("key-link")); err != nil {
		t.Skipf("hard links not possible here: %v", err)
	}
	must(t, os.Link(filepath.Join(own.data, "MANIFEST"), e.path("manifest-link")))
	must(t, os.Link(own.config, e.path("config-link")))
	for _, p := range []string{"key-link", "manifest-link", "config-link"} {
		err := e.refusedCall(t, "read_files", jsonArgs(t, map[string]any{"paths": []string{p}}))
		errIsProtected(t, err)
		e.refusedCall(t, "edit_file", jsonArgs(t, map[string]any{"path": p, "content": "pwned"}))
	}
	must(t, os.Remove(e.path("manifest-link"))) // own.intact counts links of the data dir's files
	must(t, os.Remove(e.path("key-link")))
	own.intact(t)
}

// TestGuardOpenedCatchesASwap: when a symlink is swapped in after the check
// by path, the check of what was opened still refuses it.
func TestGuardOpenedCatchesASwap(t *testing.T) {
	e, own := newProtectedEnv(t, func(ws, base string) ownFilesLayout {
		return makeOwnFiles(t, filepath.Join(ws, "state"), "")
	})
	f, err := os.Open(own.key) // what the open of an innocent name found after a swap
	must(t, err)
	defer f.Close()
	err = e.ws.guardOpened("innocent.txt", f, false)
	errIsProtected(t, err)
	if err == nil {
		t.Fatal("guardOpened accepted the key")
	}
}

// TestSwapIntoDataDirRace flips a symlink between an ordinary directory and
// the data directory (inside the workspace, where os.Root lets it through)
// while reads and writes go through it: none may see or change the key.
func TestSwapIntoDataDirRace(t *testing.T) {
	e, own := newProtectedEnv(t, func(ws, base string) ownFilesLayout {
		return makeOwnFiles(t, filepath.Join(ws, "state"), "")
	})
	e.write("real/secret.key", "ordinary\n")
	must(t, os.Symlink("real", e.path("sw")))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		targets := []string{"state", "real"}
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
	var oks, refused int
	for i := range 300 {
		tool, args := "read_files", `{"paths":["sw/secret.key"]}`
		if i%2 == 1 {
			tool, args = "edit_file", `{"path":"sw/secret.key","content":"ordinary\n"}`
		}
		out, err := e.call(tool, args)
		if err == nil {
			oks++
		} else {
			refused++
		}
		if strings.Contains(out, "AES-KEY-BYTES") {
			t.Errorf("%s saw the key through a swapped symlink:\n%s", tool, out)
			break
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d calls ok, %d refused", oks, refused)
	own.intact(t)
}

// TestProtectedPaths: the list a sandbox gets holds the paths as given and
// resolved, and the old data directory.
func TestProtectedPaths(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	must(t, os.Mkdir(ws, 0o755))
	real := filepath.Join(base, "real-state")
	must(t, os.Mkdir(real, 0o700))
	must(t, os.Symlink(real, filepath.Join(base, "state")))
	w, err := OpenWorkspace(ws, WithProtected(filepath.Join(base, "state"), filepath.Join(base, "state", "secret.key"), ""))
	must(t, err)
	defer w.Close()
	got := w.ProtectedPaths()
	for _, want := range []string{filepath.Join(w.Dir(), ".tooldispatch"), filepath.Join(base, "state"), real,
		filepath.Join(base, "state", "secret.key"), filepath.Join(real, "secret.key")} {
		if !slices.Contains(got, want) {
			t.Errorf("ProtectedPaths() = %v, lacks %s", got, want)
		}
	}
}

// errIsProtected fails unless err is nil or matches ErrProtected.
func errIsProtected(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, ErrProtected) {
		t.Errorf("error %v does not match ErrProtected", err)
	}
}
