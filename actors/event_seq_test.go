package actors

import (
	"context"
	"testing"

	"github.com/tooldispatch/tooldispatch/messages"
)

// confirmHashes returns the args_hash of every tool_confirm event seen, by
// call id.
func (n *deferNode) confirmHashes() map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]string{}
	for _, e := range n.events {
		if e.Kind == EventToolConfirm {
			out[e.CallId] = e.ArgsHash
		}
	}
	return out
}

// checkSeqs fails unless the events' sequence numbers increase strictly in
// the order the sink received them (so none repeats).
func checkSeqs(t *testing.T, evs []*messages.Event) {
	t.Helper()
	seen := map[uint64]*messages.Event{}
	var last uint64
	for _, e := range evs {
		if p, ok := seen[e.Seq]; ok {
			t.Errorf("seq %d is both %s of %s and %s of %s", e.Seq, p.Kind, p.CallId, e.Kind, e.CallId)
		}
		seen[e.Seq] = e
		if e.Seq <= last {
			t.Errorf("seq %d (%s of %s) after %d", e.Seq, e.Kind, e.CallId, last)
		}
		last = e.Seq
	}
}

// TestApprovedCallsEventSeqsUnique: two deferred calls of one turn,
// call_2 and call_55, both approved, emit events with sequence numbers
// of their own, each after everything the session emitted before; a
// client resuming with Last-Event-ID after the first answer's events
// gets the second's.
func TestApprovedCallsEventSeqsUnique(t *testing.T) {
	n := openDeferNode(t, t.TempDir())
	defer n.close(t)
	ctx := context.Background()
	if _, err := n.d.Dispatch(ctx, deferTurn(call("call_2", "write", `{"path":"a"}`), call("call_55", "write", `{"path":"b"}`))); err != nil {
		t.Fatal(err)
	}
	n.drain()
	hashes := n.confirmHashes()
	for _, id := range []string{"call_2", "call_55"} {
		if st := n.confirm(t, id, hashes[id], true); st != confirmAccepted {
			t.Fatalf("answer for %s = %q, want accepted", id, st)
		}
		if e := n.nextResult(t); e.CallId != id {
			t.Fatalf("tool_result for %s, want %s", e.CallId, id)
		}
	}
	n.mu.Lock()
	evs := append([]*messages.Event(nil), n.events...)
	n.mu.Unlock()
	checkSeqs(t, evs)
}
