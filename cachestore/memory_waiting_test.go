package cachestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
)

// TestMemoryWaitingScanIsBounded: a listing whose filter matches few
// entries examines at most MaxScan of them and says where to go on.
func TestMemoryWaitingScanIsBounded(t *testing.T) {
	m := cachestore.NewMemory()
	asked := time.Unix(1_700_000_000, 0).UTC()
	c := storetest.DeferredTurn("s", "r", 1, 60, asked, 0, "edit_file", "edit_file", "run_command")
	if err := m.CommitTurn(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	for _, session := range []string{"", "s"} {
		p, err := m.ListWaiting(context.Background(), cachestore.WaitingQuery{Session: session, Tool: "run_command", MaxScan: 30})
		if err != nil || len(p.Items) != 10 || p.Next == nil || p.Next.CallID != "call_1_29" {
			t.Errorf("session %q: a scan of 30 with a filter matching a third gave %d items (next %+v), %v; want 10, next after call_1_29",
				session, len(p.Items), p.Next, err)
		}
	}
}
