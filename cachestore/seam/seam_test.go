package seam_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/seam"
	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
	"github.com/tooldispatch/tooldispatch/messages"
)

// recorder is a hook that refuses nothing and records every operation.
type recorder struct {
	mu    sync.Mutex
	ops   []seam.Op
	after int
}

func (r *recorder) Before(_ context.Context, op *seam.Op) error {
	r.mu.Lock()
	r.ops = append(r.ops, *op)
	r.mu.Unlock()
	return nil
}

func (r *recorder) After(_ context.Context, _ *seam.Op, err error) error {
	r.mu.Lock()
	r.after++
	r.mu.Unlock()
	return err
}

// TestContractThroughTheSeam: a store behind the seam, with a hook that
// refuses nothing, is the store: it passes the whole Store contract, and
// the hook saw every operation before and after it ran.
func TestContractThroughTheSeam(t *testing.T) {
	rec := &recorder{}
	storetest.Run(t, func(t *testing.T) (cachestore.Store, func() cachestore.Store) {
		return storetest.RecoverOnRestart(t, seam.Wrap(cachestore.NewMemory(), rec))
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.ops) == 0 || rec.after != len(rec.ops) {
		t.Fatalf("the hook saw %d operations before and %d after", len(rec.ops), rec.after)
	}
	seen := map[seam.Kind]bool{}
	for _, op := range rec.ops {
		seen[op.Kind] = true
	}
	for _, k := range []seam.Kind{seam.LoadSession, seam.WriteIntent, seam.CommitTurn, seam.Amend, seam.ClaimApproval,
		seam.SettleApproval, seam.CacheGet, seam.CachePut, seam.KVPut, seam.KVCreate, seam.SaveFileVersion, seam.RecoverAll} {
		if !seen[k] {
			t.Errorf("the contract's run never passed a %s through the hook", k)
		}
	}
}

// refuser refuses every write.
type refuser struct{}

var errRefused = errors.New("refused")

func (refuser) Before(_ context.Context, op *seam.Op) error {
	if op.Kind.Write() {
		return errRefused
	}
	return nil
}

func (refuser) After(_ context.Context, _ *seam.Op, err error) error { return err }

// TestRefusedWritesWriteNothing: a write the hook refuses never reaches
// the store, and the hook's error is what the caller gets.
func TestRefusedWritesWriteNothing(t *testing.T) {
	m := cachestore.NewMemory()
	s := seam.Wrap(m, refuser{})
	ctx := context.Background()
	if _, err := s.LoadSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	rec := &messages.TurnRecord{Turn: 1, Run: "r", Assistant: &messages.AssistantMessage{Role: "assistant"}}
	if err := s.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: rec}); !errors.Is(err, errRefused) {
		t.Fatalf("CommitTurn = %v, want the hook's error", err)
	}
	if err := s.KVPut(ctx, "ns", "k", []byte("v")); !errors.Is(err, errRefused) {
		t.Fatalf("KVPut = %v, want the hook's error", err)
	}
	if turns, _ := m.Turns(ctx, "s"); len(turns) != 0 {
		t.Errorf("a refused commit wrote %d turns", len(turns))
	}
	if _, err := m.KVGet(ctx, "ns", "k"); !errors.Is(err, cachestore.ErrNotFound) {
		t.Errorf("a refused KVPut wrote: %v", err)
	}
}

// TestKinds: every kind has a name that parses back, and exactly the
// writing ones say so.
func TestKinds(t *testing.T) {
	var writes []string
	for _, k := range seam.Kinds() {
		if got, ok := seam.ParseKind(k.String()); !ok || got != k {
			t.Errorf("ParseKind(%q) = %v, %v", k, got, ok)
		}
		if k.Write() {
			writes = append(writes, k.String())
		}
	}
	want := []string{"intent", "commit", "amend", "claim_approval", "settle_approval", "end_run", "cache_put", "kv_put",
		"kv_create", "kv_delete", "file_version", "recover"}
	if !slices.Equal(writes, want) {
		t.Errorf("writes = %v, want %v", writes, want)
	}
	if _, ok := seam.ParseKind("flush"); ok {
		t.Error("ParseKind took an unknown name")
	}
}

// TestIntentNamesItsCalls: an intent's operation carries the ids of the
// calls it records as started, so that the intents of one turn are told
// apart by what they are about rather than by their order.
func TestIntentNamesItsCalls(t *testing.T) {
	rec := &recorder{}
	s := seam.Wrap(cachestore.NewMemory(), rec)
	ctx := context.Background()
	if _, err := s.LoadSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	in := &cachestore.Intent{Session: "s", Turn: 1, Run: "r", Assistant: &messages.AssistantMessage{Role: "assistant"},
		Names: []string{"a", "b", "c"}, IDs: []string{"c1", "c2", "c3"}, Started: []int{0}}
	for _, started := range [][]int{{0}, {0, 2}} {
		in.Started = started
		if err := s.WriteIntent(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var keys []string
	for _, op := range rec.ops {
		if op.Kind == seam.WriteIntent {
			keys = append(keys, op.Key)
		}
	}
	if want := []string{"c1", "c1,c3"}; !slices.Equal(keys, want) {
		t.Errorf("the intents' keys are %q, want %q", keys, want)
	}
}
