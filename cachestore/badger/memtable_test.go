package badger

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
)

// TestOpenAfterCrashLeavesAnEmptyLogFile: Badger creates a memtable or
// value-log file and then sizes it, and deletes one by emptying it and then
// removing it; a process killed between the two steps leaves a file of
// zero bytes. The store still opens, with every committed turn.
func TestOpenAfterCrashLeavesAnEmptyLogFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		// crash makes the file a kill would leave in dir, whose value-log
		// files after the set-up are 000001 (turn 1), 000002 and 000003
		// (no entry, the header only).
		crash func(t *testing.T, dir string)
	}{
		{"killed while creating a memtable", func(t *testing.T, dir string) {
			empty(t, filepath.Join(dir, "00009.mem"))
		}},
		{"killed while creating a value-log file", func(t *testing.T, dir string) {
			empty(t, filepath.Join(dir, "000004.vlog"))
		}},
		{"killed while deleting an empty value-log file", func(t *testing.T, dir string) {
			// The next open would delete 000002 (no entry, not the last):
			// emptied, not yet removed.
			p := filepath.Join(dir, "000002.vlog")
			if fi, err := os.Stat(p); err != nil || fi.Size() != vlogHeader {
				t.Fatalf("set-up: 000002.vlog is %v, %v; want the %d-byte header only", fi, err, vlogHeader)
			}
			if err := os.Truncate(p, 0); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for turn := int64(1); turn <= 3; turn++ {
				s, err := Open(TestOptions(dir))
				if err != nil {
					t.Fatal(err)
				}
				if turn == 1 { // a turn big enough for the value log
					storetest.Commit(t, s, "s", loopRecord("s", turn))
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
			tc.crash(t, dir)
			s, err := Open(TestOptions(dir))
			if err != nil {
				t.Fatalf("open after the crash: %v", err)
			}
			defer s.Close()
			turns, err := s.Turns(context.Background(), "s")
			if err != nil || len(turns) != 1 {
				t.Fatalf("turns after reopening: %d, %v", len(turns), err)
			}
		})
	}
}

// vlogHeader is the size of a value-log file holding no entry.
const vlogHeader = 20

func empty(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
