package badger

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
)

// TestOpenAfterCrashDuringMemtableCreation: a process killed between
// creating a memtable file and sizing it leaves an empty .mem file; the
// store still opens, with every committed turn.
func TestOpenAfterCrashDuringMemtableCreation(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	storetest.Commit(t, s, "s", storetest.Record(1, "r", "", 2))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00009.mem"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(TestOptions(dir))
	if err != nil {
		t.Fatalf("open with an empty memtable file: %v", err)
	}
	defer s.Close()
	turns, err := s.Turns(ctx, "s")
	if err != nil || len(turns) != 1 {
		t.Fatalf("turns after reopening: %d, %v", len(turns), err)
	}
}
