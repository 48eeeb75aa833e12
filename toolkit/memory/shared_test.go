package memory

import (
	"context"
	"fmt"
	"slices"
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
	if fixes := b.PastFixes(context.Background(), "s1", "run_command", "permission denied writing build/out"); len(fixes) == 0 {
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

// TestSharedWritersClaimDistinctNumbers: two members that both read the
// same sequence number before writing (held at a barrier) do not write one
// record number twice: the second claim loses, catches up and takes the
// next number, and both records are kept.
func TestSharedWritersClaimDistinctNumbers(t *testing.T) {
	store := &seqBarrier{Memory: cachestore.NewMemory()}
	ws := t.TempDir()
	a, b := New(store, ws, Shared()), New(store, ws, Shared())
	mustRun(t, a, "write_error", `{"tool":"x","symptom":"first","action":"retry","outcome":"failed"}`)
	mustRun(t, b, "error_history", `{"tool":"x"}`) // b has loaded E1
	store.arm(2)
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i, m := range []*Memory{a, b} {
		wg.Go(func() {
			outs[i] = mustRun(t, m, "write_error", fmt.Sprintf(`{"tool":"x","symptom":"racing %d","action":"retry","outcome":"failed"}`, i))
		})
	}
	wg.Wait()
	ida, _, _ := strings.Cut(strings.TrimPrefix(outs[0], "Recorded "), " ")
	idb, _, _ := strings.Cut(strings.TrimPrefix(outs[1], "Recorded "), " ")
	if ida == idb || !slices.Contains([]string{"E2", "E3"}, ida) || !slices.Contains([]string{"E2", "E3"}, idb) {
		t.Errorf("the racing writers got %s and %s, want E2 and E3", ida, idb)
	}
	recs, err := store.KVList(context.Background(), Namespace(canonicalDir(ws)), recordPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Errorf("%d records stored, want 3: a write was lost", len(recs))
	}
}

// seqBarrier holds the next n reads of the sequence number until all n
// were made, so that n writers start from the same number.
type seqBarrier struct {
	*cachestore.Memory
	mu      sync.Mutex
	pending int
	arrived *sync.WaitGroup
}

func (s *seqBarrier) arm(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = n
	s.arrived = &sync.WaitGroup{}
	s.arrived.Add(n)
}

func (s *seqBarrier) KVGet(ctx context.Context, ns, key string) ([]byte, error) {
	v, err := s.Memory.KVGet(ctx, ns, key)
	if key != seqKey {
		return v, err
	}
	s.mu.Lock()
	wait := s.pending > 0
	wg := s.arrived
	if wait {
		s.pending--
	}
	s.mu.Unlock()
	if wait {
		wg.Done()
		wg.Wait()
	}
	return v, err
}
