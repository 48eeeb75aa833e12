package web

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDownloadPreview: download_file's preview says what it does to its
// file as it is (create, replace, or fail), shows the URL as given (a
// secret reference unresolved), and binds the approval to the file's state.
func TestDownloadPreview(t *testing.T) {
	w, dir := newDownloadWeb(t, 0)
	if err := os.WriteFile(filepath.Join(dir, "have.txt"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tool := tool(t, w, DownloadFileName)
	if tool.Preview == nil || tool.FileState == nil {
		t.Fatal("download_file has no preview")
	}
	ctx := context.Background()
	tests := []struct {
		name string
		args obj
		note string
	}{
		{"new file", obj{"url": "https://example.com/a?k=${secret:TOKEN}", "path": "new.txt"}, "downloads https://example.com/a?k=${secret:TOKEN} into new.txt, a new file"},
		{"replace", obj{"url": "https://example.com/a", "path": "have.txt", "overwrite": true}, "replacing its 4 B"},
		{"exists without overwrite", obj{"url": "https://example.com/a", "path": "have.txt"}, "already exists and overwrite is not true: the call will fail"},
		{"outside", obj{"url": "https://example.com/a", "path": "../x"}, "the path is refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := objArgs(t, tt.args)
			pv := tool.Preview(ctx, a)
			if pv.Diff != "" || !strings.Contains(pv.Note, tt.note) {
				t.Errorf("preview %+v, want a note with %q", pv, tt.note)
			}
			if strings.Contains(pv.Note, tokenValue) {
				t.Error("the preview resolved a secret")
			}
			if st := tool.FileState(ctx, a); st != pv.State {
				t.Errorf("FileState %q differs from the preview's %q", st, pv.State)
			}
		})
	}
	a := objArgs(t, obj{"url": "https://example.com/a", "path": "have.txt", "overwrite": true})
	pv := tool.Preview(ctx, a)
	if err := os.WriteFile(filepath.Join(dir, "have.txt"), []byte("other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st := tool.FileState(ctx, a); st == pv.State {
		t.Error("the file changed, but the state is still the approved one")
	}
}
