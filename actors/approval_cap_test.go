package actors

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/messages"
)

// sessionDeferTurn is deferTurn in session s.
func sessionDeferTurn(s string, calls ...*messages.ToolCall) *messages.DispatchTurn {
	t := deferTurn(calls...)
	t.Session = s
	return t
}

// writes are n deferred write calls named prefix0, prefix1, ….
func writes(prefix string, n int) []*messages.ToolCall {
	out := make([]*messages.ToolCall, n)
	for i := range out {
		out[i] = call(fmt.Sprintf("%s%d", prefix, i), "write", fmt.Sprintf(`{"path":"%s%d.txt"}`, prefix, i))
	}
	return out
}

// TestDeferredApprovalsCappedPerService: past the service's cap of waiting
// approvals (every session's together), a call that would wait is
// committed skipped, saying why, with the rest of its turn — the calls
// that fit still wait, a read-only call runs, nothing of the skipped ones
// is kept — and once an answer settles one, a call may wait again.
func TestDeferredApprovalsCappedPerService(t *testing.T) {
	s, err := badger.Open(badger.TestOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	p := newProbe()
	d, err := New(Config{Registry: testRegistry(p), Store: s, MaxConcurrency: 3, WatchdogGrace: 20 * time.Millisecond,
		MaxWaitingApprovals: 5})
	if err != nil {
		t.Fatal(err)
	}
	n := &deferNode{store: s, p: p, d: d, result: make(chan *messages.Event, 16)}
	defer n.close(t)
	ctx := context.Background()
	dispatch := func(tr *messages.DispatchTurn) []*messages.ToolMessage {
		t.Helper()
		r, err := d.Dispatch(ctx, tr)
		if err != nil || r.GetError() != "" {
			t.Fatalf("Dispatch: %v %s", err, r.GetError())
		}
		return r.GetMessages()
	}
	statusesOf := func(ms []*messages.ToolMessage) string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ToolCallId+":"+m.Status)
		}
		return strings.Join(out, " ")
	}
	if got := statusesOf(dispatch(sessionDeferTurn("a", writes("a", 3)...))); got != "a0:awaiting_approval a1:awaiting_approval a2:awaiting_approval" {
		t.Fatalf("session a under the cap: %s", got)
	}
	msgs := dispatch(sessionDeferTurn("b", append(writes("b", 4), call("r", "read", `{"path":"x"}`))...))
	if got := statusesOf(msgs); got != "b0:awaiting_approval b1:awaiting_approval b2:skipped b3:skipped r:ok" {
		t.Errorf("session b past the cap of 5 with 3 waiting: %s", got)
	}
	if c := msgs[2].Content; !strings.Contains(c, "this service keeps at most 5 calls waiting for approval") {
		t.Errorf("b2 was skipped with %q, want the service's cap as the reason", c)
	}
	all, err := s.Approvals(ctx, "")
	if err != nil || len(all) != 5 {
		t.Errorf("the store keeps %d approvals (%v), want 5", len(all), err)
	}
	page, err := s.ListWaiting(ctx, cachestore.WaitingQuery{})
	if err != nil || len(page.Items) != 5 {
		t.Errorf("the index lists %d (%v), want 5", len(page.Items), err)
	}
	if got := statusesOf(dispatch(sessionDeferTurn("c", writes("c", 1)...))); got != "c0:skipped" {
		t.Errorf("session c at the cap: %s", got)
	}
	ack, err := d.Confirm(ctx, &messages.ConfirmReply{Session: "a", CallId: "a0", ArgsHash: all[0].ArgsHash, Approve: false})
	if err != nil || ack.Status != confirmAccepted {
		t.Fatalf("denying a0: %v %v", ack, err)
	}
	if got := statusesOf(dispatch(sessionDeferTurn("c", writes("d", 1)...))); got != "d0:awaiting_approval" {
		t.Errorf("session c once an answer made room: %s", got)
	}
}
