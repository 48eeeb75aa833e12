package memory

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tooldispatch/tooldispatch/cachestore"
)

// TestSharedMemories: two Memories over one store and workspace path, as
// two cluster members (Shared): a record written by one is found by the
// other's error_history and PastFixes at once, and concurrent writers on
// both never give two records one id nor lose one.
func TestSharedMemories(t *testing.T) {
	store := cachestore.NewMemory()
	ws := t.TempDir()
	a, b := New(store, ws, Shared()), New(store, ws, Shared())
	// b has loaded its (empty) records before a writes.
	if out := mustRun(t, b, "error_history", `{"tool":"run_command"}`); strings.Contains(out, "E1") {
		t.Fatalf("records before any write: %s", out)
	}
	mustRun(t, a, "write_error", `{"tool":"run_command","symptom":"permission denied writing build/out","action":"chmod the build directory","outcome":"resolved"}`)
	if out := mustRun(t, b, "error_history", `{"tool":"run_command"}`); !strings.Contains(out, "E1 [resolved]") {
		t.Errorf("the other memory does not see the record:\n%s", out)
	}
	if fixes := b.PastFixes(context.Background(), "run_command", "permission denied writing build/out"); len(fixes) == 0 {
		t.Error("the other memory's PastFixes misses the record")
	}

	const n = 20
	var wg sync.WaitGroup
	outs := make([]string, 2*n)
	errs := make([]error, 2*n)
	for i := range 2 * n {
		m := a
		if i%2 == 1 {
			m = b
		}
		wg.Go(func() {
			outs[i], errs[i] = run(t, m, "write_error", fmt.Sprintf(`{"tool":"x","symptom":"failure %d","action":"retry","outcome":"failed"}`, i))
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range 2 * n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(outs[i], "Recorded "), " ")
		if seen[id] {
			t.Errorf("id %s handed out twice", id)
		}
		seen[id] = true
	}
	recs, err := store.KVList(context.Background(), Namespace(canonicalDir(ws)), recordPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2*n+1 {
		t.Errorf("%d records stored, want %d: a write was lost", len(recs), 2*n+1)
	}
}
