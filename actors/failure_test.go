package actors

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// TestTurnPanicOneReplyAndNoOverlap makes a turn fail inside pass 1 (a
// read-only policy that panics) while two more turns of the session are
// queued, all sent as plain messages (id 0): every requester gets exactly
// one reply, and the queued turns run one after the other.
func TestTurnPanicOneReplyAndNoOverlap(t *testing.T) {
	h := newHarness(t, nil)
	h.d.cfg.Registry.Register(toolkit.Tool{Name: "trap", Description: "Its policy panics.", Concurrent: true,
		Schema:       json.RawMessage(objSchema),
		ReadOnlyFunc: func(toolkit.Args) bool { panic("policy bug") },
		Handler:      func(context.Context, *toolkit.Call) (toolkit.Result, error) { return toolkit.Result{Content: "x"}, nil }})

	var mu sync.Mutex
	var replies []*messages.TurnResult
	got := make(chan struct{}, 8)
	collector := h.d.root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if r, ok := ctx.Message().(*messages.TurnResult); ok {
			mu.Lock()
			replies = append(replies, r)
			mu.Unlock()
			got <- struct{}{}
		}
	}))
	send := func(calls ...*messages.ToolCall) {
		h.d.root.RequestWithCustomSender(h.d.PID(), turn("s1", "r1", calls...), collector)
	}
	send(call("p", "trap", `{"x":"1"}`))
	send(call("a", "echo", `{"ms":20,"x":"a"}`))
	send(call("b", "echo", `{"ms":20,"x":"b"}`))
	// A fourth turn, queued behind the others, marks the end: a second
	// reply to any of the first three is sent before the marker's reply,
	// so it reaches the collector first.
	send(call("m", "echo", `{"x":"marker"}`))
	for i := 0; ; i++ {
		select {
		case <-got:
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d of 4 replies", i)
		}
		mu.Lock()
		last := replies[len(replies)-1]
		mu.Unlock()
		if len(last.Messages) == 1 && last.Messages[0].ToolCallId == "m" {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(replies) != 4 {
		t.Fatalf("%d replies for 4 turns", len(replies))
	}
	if replies[0].Error == "" {
		t.Errorf("the failed turn's reply has no error: %+v", replies[0])
	}
	if replies[1].Messages[0].Status != "ok" || replies[2].Messages[0].Status != "ok" || replies[1].Turn >= replies[2].Turn {
		t.Errorf("queued turns: %+v / %+v", replies[1], replies[2])
	}
	if h.p.peak.Load() != 1 {
		t.Errorf("the queued turns overlapped: %d calls in flight at once", h.p.peak.Load())
	}
}
