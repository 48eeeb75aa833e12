package web

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// TestDownloadFileLeavesOwnFilesAlone: download_file never replaces or
// creates tooldispatch's own files, by a symlink or their own name, and
// never replaces a file with other names (hard links).
func TestDownloadFileLeavesOwnFilesAlone(t *testing.T) {
	s := newSite(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "state")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(data, "secret.key")
	outside := filepath.Join(t.TempDir(), "outside.txt")
	for _, p := range []string{key, outside} {
		if err := os.WriteFile(p, []byte("KEEP"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("state", filepath.Join(dir, "dd")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, filepath.Join(dir, "hl.txt")); err != nil {
		t.Skipf("hard links not possible here: %v", err)
	}
	ws, err := builtin.OpenWorkspace(dir, builtin.WithProtected(data, key))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	deps := testDeps(newFakeClock())
	deps.Workspace = ws
	w := newWeb(t, deps)

	for _, tt := range []struct {
		name, path, want string
	}{
		{"the key through a symlink", "dd/secret.key", "tooldispatch's own files"},
		{"a new file in the data directory", "dd/new.json", "tooldispatch's own files"},
		{"the key by its name", "state/secret.key", "tooldispatch's own files"},
		{"the key absolute", key, "tooldispatch's own files"},
		{"a hard-linked file", "hl.txt", "hard links"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, w, DownloadFileName, "s1", obj{"url": s.URL + "/json", "path": tt.path, "overwrite": true})
			wantErr(t, err, tt.want)
		})
	}
	for _, p := range []string{key, outside} {
		if b, _ := os.ReadFile(p); string(b) != "KEEP" {
			t.Errorf("%s changed: %q", p, b)
		}
	}
	if entries, _ := os.ReadDir(data); len(entries) != 1 {
		t.Errorf("the data directory holds %d entries, want the key only", len(entries))
	}
	assertNoTempFiles(t, dir)
}
