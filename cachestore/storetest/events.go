package storetest

import (
	"context"
	"testing"

	"github.com/tooldispatch/tooldispatch/cachestore"
)

// testEventCounter: a session's event counter (SessionState.EventBlock)
// starts at 0, every LoadSession takes EventBlocksPerLoad blocks, an
// intent and a commit store the counter they carry (one that carries
// none leaves it), it survives a restart and the resolution of an
// intent (which may take blocks too), and a session committed without one (as stored before the
// counter existed) loads one past every number the older numbering gave.
func testEventCounter(t *testing.T, open Opener) {
	s, restart := open(t)
	ctx := context.Background()
	if st := LoadSession(t, s, "s"); st.EventBlock != 0 {
		t.Fatalf("EventBlock of a new session = %d, want 0", st.EventBlock)
	}
	if st := LoadSession(t, s, "s"); st.EventBlock != cachestore.EventBlocksPerLoad {
		t.Fatalf("EventBlock on the second load = %d, want %d (each load takes its blocks)", st.EventBlock, cachestore.EventBlocksPerLoad)
	}
	if err := s.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: Record(1, "r", "", 1), EventBlock: 10}); err != nil {
		t.Fatal(err)
	}
	Commit(t, s, "s", Record(2, "r", "", 1)) // carries no counter
	s = restart()
	if st := LoadSession(t, s, "s"); st.EventBlock != 10 || st.NextTurn != 3 {
		t.Fatalf("after a commit storing 10 and a restart: EventBlock %d, NextTurn %d; want 10, 3", st.EventBlock, st.NextTurn)
	}
	in := &cachestore.Intent{Session: "s", Turn: 3, Run: "r", Assistant: Record(3, "r", "", 1).Assistant,
		Names: []string{"echo"}, IDs: []string{"c3_0"}, Started: []int{0}, EventBlock: 20}
	if err := s.WriteIntent(ctx, in); err != nil {
		t.Fatal(err)
	}
	s = restart()
	// Resolving the intent on a restart may take blocks of its own (a
	// store that resolves it as a load does): never fewer than stored.
	st := LoadSession(t, s, "s")
	if st.EventBlock < 20 || st.NextTurn != 4 {
		t.Fatalf("after an intent storing 20, a restart and its resolution: EventBlock %d, NextTurn %d; want at least 20, 4", st.EventBlock, st.NextTurn)
	}
	if got := LoadSession(t, s, "s"); got.EventBlock != st.EventBlock+cachestore.EventBlocksPerLoad {
		t.Fatalf("EventBlock on the next load = %d, want %d", got.EventBlock, st.EventBlock+cachestore.EventBlocksPerLoad)
	}

	for turn := int64(1); turn <= 3; turn++ {
		Commit(t, s, "old", Record(turn, "r", "", 1))
	}
	if st := LoadSession(t, s, "old"); st.EventBlock != 5 {
		t.Fatalf("EventBlock of a session of 3 turns stored without a counter = %d, want 5 (next turn 4, plus one)", st.EventBlock)
	}
}
