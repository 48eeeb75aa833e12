package actors

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tooldispatch/tooldispatch/messages"
)

// TestDeferredApprovalCallIDReused: a model that names again, in a later
// turn of the session, the id of a call still awaiting approval, with
// other arguments, neither replaces the approval the person was shown nor
// leaves the earlier call awaiting an approval that is gone: the repeated
// call is skipped, and the earlier approval is answered and runs as shown.
func TestDeferredApprovalCallIDReused(t *testing.T) {
	n := openDeferNode(t, t.TempDir())
	defer n.close(t)
	ctx := context.Background()
	if _, err := n.d.Dispatch(ctx, deferTurn(call("c2", "write", `{"path":"a.txt"}`))); err != nil {
		t.Fatal(err)
	}
	first, err := n.store.Approvals(ctx, "s")
	if err != nil || len(first) != 1 {
		t.Fatalf("Approvals = %+v, %v", first, err)
	}
	r, err := n.d.Dispatch(ctx, deferTurn(call("c2", "write", `{"path":"b.txt"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(r); len(got) != 1 || got[0] != "c2=skipped" {
		t.Errorf("the repeated call id = %v, want skipped", got)
	}
	if as, err := n.store.Approvals(ctx, "s"); err != nil || len(as) != 1 || as[0].ArgsHash != first[0].ArgsHash || as[0].Turn != 1 {
		t.Fatalf("after the repeated call id the approvals are %+v, %v; want turn 1's, unchanged", as, err)
	}
	n.drain()
	if st := n.confirm(t, "c2", first[0].ArgsHash, true); st != confirmAccepted {
		t.Fatalf("the answer to the approval shown = %q, want accepted", st)
	}
	if e := n.nextResult(t); e.Status != "ok" || !strings.Contains(e.Text, "a.txt") {
		t.Errorf("tool_result = %s %q, want the shown call's result", e.Status, e.Text)
	}
	turns, err := n.store.Turns(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range turns {
		for _, m := range rec.ToolMessages {
			if m.Status == "awaiting_approval" {
				t.Errorf("turn %d's %s is still awaiting approval with no approval left to answer", rec.Turn, m.ToolCallId)
			}
		}
	}
}

// TestDeferredApprovalConcurrentAnswers: many approving and denying
// answers to one deferred call at once: exactly one is accepted and the
// call runs at most once.
func TestDeferredApprovalConcurrentAnswers(t *testing.T) {
	n := openDeferNode(t, t.TempDir())
	defer n.close(t)
	ctx := context.Background()
	if _, err := n.d.Dispatch(ctx, deferTurn(call("c2", "write", `{"path":"a.txt"}`))); err != nil {
		t.Fatal(err)
	}
	as, err := n.store.Approvals(ctx, "s")
	if err != nil || len(as) != 1 {
		t.Fatalf("Approvals = %+v, %v", as, err)
	}
	n.drain()
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	for i := range 16 {
		wg.Go(func() {
			st := n.confirm(t, "c2", as[0].ArgsHash, i%3 != 0)
			if i == 5 {
				_ = n.d.EndRun(ctx, "s", "r")
			}
			mu.Lock()
			if st == confirmAccepted {
				accepted++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if accepted != 1 {
		t.Errorf("%d answers accepted, want 1", accepted)
	}
	n.nextResult(t)
	if got := n.p.count("c2"); got > 1 {
		t.Errorf("the call ran %d times", got)
	}
}

// TestDeferredApprovalsBounded: a model cannot pile up deferred approvals
// without bound (each is kept in the store, listed by GET /v1/pending and
// shown on the operator page until answered): past maxHeldApprovals
// waiting in a session, a call that would wait is skipped, saying why.
func TestDeferredApprovalsBounded(t *testing.T) {
	n := openDeferNode(t, t.TempDir())
	defer n.close(t)
	ctx := context.Background()
	stop, drained := make(chan struct{}), make(chan struct{})
	go func() { // more tool_result events than openDeferNode buffers
		defer close(drained)
		for {
			select {
			case <-n.result:
			case <-stop:
				return
			}
		}
	}()
	defer func() { close(stop); <-drained }()
	calls := make([]*messages.ToolCall, maxHeldApprovals+1)
	for i := range calls {
		calls[i] = call(fmt.Sprintf("w%d", i), "write", fmt.Sprintf(`{"path":"f%d.txt"}`, i))
	}
	r, err := n.d.Dispatch(ctx, deferTurn(calls...))
	if err != nil {
		t.Fatal(err)
	}
	again, err := n.d.Dispatch(ctx, deferTurn(call("more", "write", `{"path":"more.txt"}`)))
	if err != nil {
		t.Fatal(err)
	}
	waiting, skipped := 0, 0
	for _, m := range append(r.GetMessages(), again.GetMessages()...) {
		switch m.Status {
		case "awaiting_approval":
			waiting++
		case "skipped":
			skipped++
			if !strings.Contains(m.Content, "waiting for approval") {
				t.Errorf("%s skipped with %q, want the reason", m.ToolCallId, m.Content)
			}
		}
	}
	as, err := n.store.Approvals(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if waiting != maxHeldApprovals || skipped != 2 || len(as) != maxHeldApprovals {
		t.Errorf("%d calls awaiting approval, %d skipped, %d approvals kept; want %d, 2, %d", waiting, skipped, len(as), maxHeldApprovals, maxHeldApprovals)
	}
}
