package actors

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// deferNode is one process's dispatcher over a Badger directory: closed
// and opened again, it is a restart.
type deferNode struct {
	d     *Dispatcher
	store *badger.Store
	p     *probe

	mu     sync.Mutex
	events []*messages.Event
	result chan *messages.Event // tool_result events
}

func openDeferNode(t *testing.T, dir string) *deferNode {
	t.Helper()
	s, err := badger.Open(badger.TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	n := &deferNode{store: s, p: newProbe(), result: make(chan *messages.Event, 16)}
	d, err := New(Config{Registry: testRegistry(n.p), Store: s, MaxConcurrency: 3, WatchdogGrace: 20 * time.Millisecond,
		Events: func(e *messages.Event) {
			n.mu.Lock()
			n.events = append(n.events, e)
			n.mu.Unlock()
			if e.Kind == EventToolResult {
				n.result <- e
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	n.d = d
	return n
}

func (n *deferNode) close(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.d.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := n.store.Close(); err != nil {
		t.Errorf("closing the store: %v", err)
	}
}

// drain empties the tool_result events of a turn.
func (n *deferNode) drain() {
	for {
		select {
		case <-n.result:
		default:
			return
		}
	}
}

// nextResult waits for the next tool_result event.
func (n *deferNode) nextResult(t *testing.T) *messages.Event {
	t.Helper()
	select {
	case e := <-n.result:
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no tool_result event")
		return nil
	}
}

func (n *deferNode) confirm(t *testing.T, callID, hash string, approve bool) string {
	t.Helper()
	ack, err := n.d.Confirm(context.Background(), &messages.ConfirmReply{Session: "s", CallId: callID, ArgsHash: hash, Approve: approve, Reason: "not now"})
	if err != nil {
		t.Fatalf("Confirm: %v", err)
	}
	return ack.Status
}

func deferTurn(calls ...*messages.ToolCall) *messages.DispatchTurn {
	t := turn("s", "r", calls...)
	t.Approve, t.Confirm = ApproveAsk, ConfirmDefer
	return t
}

func committed(t *testing.T, s cachestore.History, callID string) *messages.ToolMessage {
	t.Helper()
	turns, err := s.Turns(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range turns {
		for _, m := range rec.ToolMessages {
			if m.ToolCallId == callID {
				return m
			}
		}
	}
	t.Fatalf("call %s not committed", callID)
	return nil
}

// TestDeferredApprovalAcrossRestart: under confirm defer a call that needs
// approval does not hold its turn (committed awaiting_approval, the other
// call ran); after a restart the approval is still listed, an answer with
// another hash is refused and changes nothing, the right one runs the
// call once and amends its message once, and a second answer is refused
// as already answered.
func TestDeferredApprovalAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	n := openDeferNode(t, dir)
	r, err := n.d.Dispatch(context.Background(), deferTurn(call("c1", "echo", `{"x":"1"}`), call("c2", "write", `{"path":"a.txt"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(r); len(got) != 2 || got[0] != "c1=ok" || got[1] != "c2=awaiting_approval" {
		t.Fatalf("statuses = %v, want c1 ok and c2 awaiting_approval", got)
	}
	if n.p.count("c2") != 0 {
		t.Fatal("the call awaiting approval ran")
	}
	var hash string
	n.mu.Lock()
	for _, e := range n.events {
		if e.Kind == EventToolConfirm && e.CallId == "c2" {
			hash = e.ArgsHash
			if e.Status != string(toolkit.StatusAwaitingApproval) {
				t.Errorf("tool_confirm of a deferred call has status %q, want awaiting_approval", e.Status)
			}
		}
	}
	n.mu.Unlock()
	if hash == "" {
		t.Fatal("no tool_confirm event with the arguments' hash for the deferred call")
	}
	n.close(t)

	n = openDeferNode(t, dir)
	defer n.close(t)
	as, err := n.store.Approvals(context.Background(), "")
	if err != nil || len(as) != 1 || as[0].CallID != "c2" || as[0].ArgsHash != hash || as[0].Ceiling != ApproveAsk {
		t.Fatalf("Approvals after a restart = %+v, %v; want c2's, asked under ask", as, err)
	}
	if st := n.confirm(t, "c2", "another hash", true); st != confirmMismatch {
		t.Errorf("an answer with another hash = %q, want mismatch", st)
	}
	if as, _ := n.store.Approvals(context.Background(), "s"); len(as) != 1 || as[0].Claimed {
		t.Fatalf("the refused answer changed the approval: %+v", as)
	}
	if st := n.confirm(t, "c2", hash, true); st != confirmAccepted {
		t.Fatalf("the answer = %q, want accepted", st)
	}
	e := n.nextResult(t)
	if e.CallId != "c2" || e.Status != "ok" {
		t.Fatalf("tool_result = %s %s, want c2 ok", e.CallId, e.Status)
	}
	if got := n.p.count("c2"); got != 1 {
		t.Errorf("the approved call ran %d times, want once", got)
	}
	if m := committed(t, n.store, "c2"); m.Status != "ok" || m.Content != "wrote a.txt" || m.Name != "write" {
		t.Errorf("committed message = %v, want the call's result", m)
	}
	if st := n.confirm(t, "c2", hash, true); st != confirmAlreadyAnswered {
		t.Errorf("a second answer = %q, want already_answered", st)
	}
	if st := n.confirm(t, "c2", hash, false); st != confirmAlreadyAnswered {
		t.Errorf("a denial after the approval = %q, want already_answered", st)
	}
	if got := n.p.count("c2"); got != 1 {
		t.Errorf("after the second answers the call ran %d times, want once", got)
	}
	n.mu.Lock()
	var results int
	for _, e := range n.events {
		if e.Kind == EventToolResult && e.CallId == "c2" {
			results++
		}
	}
	n.mu.Unlock()
	if results != 1 {
		t.Errorf("%d tool_result events for the answered call, want 1", results)
	}
	if st := n.confirm(t, "nope", hash, true); st != confirmNotFound {
		t.Errorf("an answer for an unknown call = %q, want not_found", st)
	}
}

// TestDeferredApprovalDeniedAndRunEnded: a denial settles the call skipped
// with its reason; ending the run settles the run's waiting approvals
// skipped, after which an answer is refused as already answered.
func TestDeferredApprovalDeniedAndRunEnded(t *testing.T) {
	n := openDeferNode(t, t.TempDir())
	defer n.close(t)
	ctx := context.Background()
	if _, err := n.d.Dispatch(ctx, deferTurn(call("d1", "write", `{"path":"a"}`), call("d2", "write", `{"path":"b"}`))); err != nil {
		t.Fatal(err)
	}
	n.drain()
	as, err := n.store.Approvals(ctx, "s")
	if err != nil || len(as) != 2 {
		t.Fatalf("Approvals = %d, %v; want 2", len(as), err)
	}
	if st := n.confirm(t, "d1", as[0].ArgsHash, false); st != confirmAccepted {
		t.Fatalf("denial = %q, want accepted", st)
	}
	if e := n.nextResult(t); e.CallId != "d1" || e.Status != "skipped" {
		t.Errorf("tool_result = %s %s, want d1 skipped", e.CallId, e.Status)
	}
	if m := committed(t, n.store, "d1"); m.Status != "skipped" || !strings.Contains(m.Content, "not now") {
		t.Errorf("denied call = %v, want skipped with the reason", m)
	}
	if err := n.d.EndRun(ctx, "s", "r"); err != nil {
		t.Fatal(err)
	}
	if e := n.nextResult(t); e.CallId != "d2" || e.Status != "skipped" {
		t.Errorf("tool_result at the run's end = %s %s, want d2 skipped", e.CallId, e.Status)
	}
	if st := n.confirm(t, "d2", as[1].ArgsHash, true); st != confirmAlreadyAnswered {
		t.Errorf("an answer after the run ended = %q, want already_answered", st)
	}
	if n.p.count("d1")+n.p.count("d2") != 0 {
		t.Error("a denied or ended call ran")
	}
}
