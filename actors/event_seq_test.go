package actors

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
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

// seqWorld is one session's life across restarts: the dispatcher over a
// Badger directory (closed and opened again: a restart), every event any
// of its incarnations emitted, in the order the sink received them, and
// what is waiting for an answer.
type seqWorld struct {
	t     *testing.T
	dir   string
	d     *Dispatcher
	store *badger.Store
	p     *probe

	mu      sync.Mutex
	events  []*messages.Event
	results chan *messages.Event

	approvals map[string]string // call id → args hash, awaiting approval
	clients   []string          // call ids, client_pending
	turns     int
}

func (w *seqWorld) open() {
	w.t.Helper()
	s, err := badger.Open(badger.TestOptions(w.dir))
	if err != nil {
		w.t.Fatal(err)
	}
	d, err := New(Config{Registry: testRegistry(w.p), Store: s, MaxConcurrency: 3, WatchdogGrace: 20 * time.Millisecond,
		Events: func(e *messages.Event) {
			w.mu.Lock()
			w.events = append(w.events, e)
			w.mu.Unlock()
			if e.Kind == EventToolResult {
				w.results <- e
			}
		}})
	if err != nil {
		w.t.Fatal(err)
	}
	w.d, w.store = d, s
}

func (w *seqWorld) close() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.d.Close(ctx); err != nil {
		w.t.Errorf("close: %v", err)
	}
	if err := w.store.Close(); err != nil {
		w.t.Errorf("closing the store: %v", err)
	}
}

// awaitResult waits for the tool_result of callID.
func (w *seqWorld) awaitResult(callID string) {
	w.t.Helper()
	for {
		select {
		case e := <-w.results:
			if e.CallId == callID {
				return
			}
		case <-time.After(20 * time.Second):
			w.t.Fatalf("no tool_result for %s", callID)
		}
	}
}

// turn dispatches a turn of 1–3 calls: an echo (runs), a write (deferred
// for approval) or a client tool's call (client_pending).
func (w *seqWorld) turn(r *rand.Rand) {
	w.t.Helper()
	w.turns++
	var calls []*messages.ToolCall
	for i := range 1 + r.IntN(3) {
		id := fmt.Sprintf("t%d_%d", w.turns, i)
		switch r.IntN(3) {
		case 0:
			calls = append(calls, call(id, "echo", fmt.Sprintf(`{"x":%q}`, id)))
		case 1:
			calls = append(calls, call(id, "write", fmt.Sprintf(`{"path":%q}`, id)))
		default:
			calls = append(calls, call(id, "lookup", `{}`))
		}
	}
	tr := deferTurn(calls...)
	tr.ClientTools = []*messages.ToolSpec{{Name: "lookup", Parameters: `{"type":"object"}`}}
	res, err := w.d.Dispatch(context.Background(), tr)
	if err != nil || res.Error != "" {
		w.t.Fatalf("turn %d: %v %s", w.turns, err, res.GetError())
	}
	for i := range res.Messages {
		w.awaitResult(res.Messages[i].ToolCallId)
	}
	hashes := map[string]string{}
	w.mu.Lock()
	for _, e := range w.events {
		if e.Kind == EventToolConfirm {
			hashes[e.CallId] = e.ArgsHash
		}
	}
	w.mu.Unlock()
	for _, m := range res.Messages {
		switch m.Status {
		case string(toolkit.StatusAwaitingApproval):
			w.approvals[m.ToolCallId] = hashes[m.ToolCallId]
		case string(toolkit.StatusClientPending):
			w.clients = append(w.clients, m.ToolCallId)
		}
	}
}

// answer approves or denies a waiting approval, and waits for its result.
func (w *seqWorld) answer(r *rand.Rand) {
	w.t.Helper()
	ids := slices.Sorted(maps.Keys(w.approvals))
	if len(ids) == 0 {
		return
	}
	id := ids[r.IntN(len(ids))]
	ack, err := w.d.Confirm(context.Background(), &messages.ConfirmReply{Session: "s", CallId: id, ArgsHash: w.approvals[id], Approve: r.IntN(2) == 0})
	if err != nil || ack.Status != confirmAccepted {
		w.t.Fatalf("answer for %s: %v %s", id, err, ack.GetStatus())
	}
	delete(w.approvals, id)
	w.awaitResult(id)
}

// clientResult hands back a client call's result.
func (w *seqWorld) clientResult(r *rand.Rand) {
	w.t.Helper()
	if len(w.clients) == 0 {
		return
	}
	i := r.IntN(len(w.clients))
	id := w.clients[i]
	w.clients = slices.Delete(w.clients, i, i+1)
	if err := w.d.ClientResult(context.Background(), "s", id, "found "+id, false); err != nil {
		w.t.Fatalf("client result for %s: %v", id, err)
	}
	w.awaitResult(id)
}

// TestEventSeqResumeProperty: over random interleavings of turns,
// answers to deferred approvals, client results and restarts (the Badger
// directory closed and opened again), a client that saw any prefix of the
// session's events and resumes with Last-Event-ID (the last one's seq)
// gets exactly the rest: the events numbered above it are the ones
// emitted after it, none lost, none repeated.
func TestEventSeqResumeProperty(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 36))
			w := &seqWorld{t: t, dir: t.TempDir(), p: newProbe(), results: make(chan *messages.Event, 64),
				approvals: map[string]string{}}
			w.open()
			restarts := 0
			for range 30 {
				switch op := r.IntN(10); {
				case op < 4:
					w.turn(r)
				case op < 6:
					w.answer(r)
				case op < 8:
					w.clientResult(r)
				default:
					w.close()
					w.open()
					restarts++
				}
			}
			w.close()
			w.mu.Lock()
			evs := w.events
			w.mu.Unlock()
			t.Logf("%d events, %d turns, %d restarts", len(evs), w.turns, restarts)
			for k, last := range evs {
				var rest []*messages.Event
				for _, e := range evs {
					if e.Seq > last.Seq {
						rest = append(rest, e)
					}
				}
				if want := evs[k+1:]; len(rest) != len(want) || (len(rest) > 0 && rest[0] != want[0]) {
					t.Fatalf("resuming after event %d (%s of %s, seq %d): %d events numbered above it, %d emitted after it",
						k, last.Kind, last.CallId, last.Seq, len(rest), len(want))
				}
			}
			checkSeqs(t, evs)
		})
	}
}
