package service

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadIsFreshOverTheService: the service's default run is the whole
// session, so a repeated read must not hand back content the file no longer
// has after an edit made outside the service.
func TestReadIsFreshOverTheService(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	read := func(id string) toolMessage {
		t.Helper()
		r := f.postTurn("s1", turn("", "none", call(t, id, "read_files", map[string]any{"paths": []string{"notes.md"}})))
		if len(r.Messages) != 1 {
			t.Fatalf("%d messages", len(r.Messages))
		}
		return r.Messages[0]
	}
	if m := read("r1"); m.Status != "ok" || !strings.Contains(m.Content, "The answer is 42.") {
		t.Fatalf("first read: %s %q", m.Status, m.Content)
	}
	if m := read("r2"); m.Status != "deduped" {
		t.Fatalf("unchanged file: %s; want deduped", m.Status)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "notes.md"), []byte("# Notes\nThe answer changed.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if m := read("r3"); m.Status != "ok" || !strings.Contains(m.Content, "The answer changed.") {
		t.Errorf("read after the outside edit: %s %q; want the fresh content", m.Status, m.Content)
	}
}
