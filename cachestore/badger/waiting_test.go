package badger

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
	"github.com/tooldispatch/tooldispatch/messages"
)

// writeOldApprovals commits c's turn and writes its approvals as a store
// did before the index of what waits existed: the approval records under
// v1/a/, in the turn's transaction's place, and nothing else.
func writeOldApprovals(t *testing.T, b *Store, c *cachestore.TurnCommit) {
	t.Helper()
	if err := b.CommitTurn(context.Background(), &cachestore.TurnCommit{Session: c.Session, Record: c.Record}); err != nil {
		t.Fatalf("CommitTurn: %v", err)
	}
	err := b.db.Update(func(txn *badgerdb.Txn) error {
		for _, a := range c.Approvals {
			if err := txn.Set(approvalKey(a.Session, a.CallID), cachestore.EncodeApproval(a)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// dropIndex deletes the index of what waits and its mark, as a store
// written before it was.
func dropIndex(t *testing.T, b *Store) {
	t.Helper()
	for _, p := range []string{prefixWaiting, prefixWaitingSession, keyWaitingBuilt} {
		if err := b.deletePrefix(context.Background(), []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWaitingIndexOfAnOldStore: approvals a store kept before the index of
// what waits existed are listed once it is opened (their turns' ids read
// from the turns), count toward the cap, and are settled as the others; a
// store whose index no longer has one entry per approval (written since by
// a program that did not know the index) gets it rebuilt at open.
func TestWaitingIndexOfAnOldStore(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	b := mustOpen(t, TestOptions(dir))
	asked := time.Unix(1_700_000_000, 0).UTC()
	writeOldApprovals(t, b, storetest.DeferredTurn("s1", "r", 1, 3, asked, 20))
	writeOldApprovals(t, b, storetest.DeferredTurn("s2", "r", 1, 2, asked.Add(time.Second), 20))
	dropIndex(t, b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = mustOpen(t, TestOptions(dir))
	got, _ := storetest.ListAll(t, b, cachestore.WaitingQuery{Limit: 2})
	if len(got) != 5 || got[0].Session != "s1" || got[0].TurnID != "tid-s1-1" || got[4].Session != "s2" || got[4].Diff == "" {
		t.Fatalf("an old store's approvals listed as %d entries (first %+v), want the 5 with their turn ids", len(got), got)
	}
	over := storetest.DeferredTurn("s3", "r", 1, 1, asked, 0)
	over.MaxWaiting = 5
	if err := b.CommitTurn(ctx, over); !errors.Is(err, cachestore.ErrWaitingCap) {
		t.Errorf("a commit past a cap of 5 with the old store's 5 waiting = %v, want ErrWaitingCap", err)
	}
	storetest.LoadSession(t, b, "s1")
	m := &messages.ToolMessage{Role: "tool", ToolCallId: "call_1_1", Status: "skipped", Content: "denied"}
	if _, err := b.SettleApproval(ctx, "s1", "call_1_1", m); err != nil {
		t.Fatalf("SettleApproval of an old approval: %v", err)
	}
	if err := b.CommitTurn(ctx, over); err != nil {
		t.Errorf("a commit into the room its settlement made: %v", err)
	}

	// An approval written, and one settled, by a program that does not
	// keep the index.
	writeOldApprovals(t, b, storetest.DeferredTurn("s4", "r", 1, 1, asked.Add(time.Hour), 0))
	err := b.db.Update(func(txn *badgerdb.Txn) error { return txn.Delete(approvalKey("s2", "call_1_0")) })
	if err != nil {
		t.Fatal(err)
	}
	writeOldApprovals(t, b, storetest.DeferredTurn("s5", "r", 1, 1, asked.Add(2*time.Hour), 0))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = mustOpen(t, TestOptions(dir))
	got, _ = storetest.ListAll(t, b, cachestore.WaitingQuery{})
	var ids []string
	for _, w := range got {
		ids = append(ids, w.Session+"/"+w.CallID)
	}
	if want := "[s1/call_1_0 s3/call_1_0 s1/call_1_2 s2/call_1_1 s4/call_1_0 s5/call_1_0]"; fmt.Sprint(ids) != want {
		t.Errorf("after another program wrote the store the index lists %v, want %s", ids, want)
	}
	if n := b.waiting.Load(); n != 6 {
		t.Errorf("the store counts %d waiting, want 6", n)
	}
}

// TestWaitingScanIsBounded: a listing whose filter matches few entries
// examines at most MaxScan of them and says where to go on.
func TestWaitingScanIsBounded(t *testing.T) {
	b := mustOpen(t, TestOptions(""))
	asked := time.Unix(1_700_000_000, 0).UTC()
	c := storetest.DeferredTurn("s", "r", 1, 60, asked, 0, "edit_file", "edit_file", "run_command")
	if err := b.CommitTurn(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	for _, session := range []string{"", "s"} {
		p, err := b.ListWaiting(context.Background(), cachestore.WaitingQuery{Session: session, Tool: "run_command", MaxScan: 30})
		if err != nil || len(p.Items) != 10 || p.Next == nil || p.Next.CallID != "call_1_29" {
			t.Errorf("session %q: a scan of 30 with a filter matching a third gave %d items (next %+v), %v; want 10, next after call_1_29",
				session, len(p.Items), p.Next, err)
		}
	}
}
