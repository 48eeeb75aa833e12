package actors

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// panickyStore panics in the store method named by panicOn, once.
type panickyStore struct {
	cachestore.SessionStore
	panicOn string
	armed   atomic.Bool
}

func (s *panickyStore) trip(method string) {
	if method == s.panicOn && s.armed.CompareAndSwap(true, false) {
		panic("store bug in " + method)
	}
}

func (s *panickyStore) LoadSession(ctx context.Context, session string) (cachestore.SessionState, error) {
	s.trip("LoadSession")
	return s.SessionStore.LoadSession(ctx, session)
}

func (s *panickyStore) WriteIntent(ctx context.Context, in *cachestore.Intent) error {
	s.trip("WriteIntent")
	return s.SessionStore.WriteIntent(ctx, in)
}

func (s *panickyStore) CommitTurn(ctx context.Context, c *cachestore.TurnCommit) error {
	s.trip("CommitTurn")
	return s.SessionStore.CommitTurn(ctx, c)
}

func (s *panickyStore) EndRun(ctx context.Context, session, run string) error {
	s.trip("EndRun")
	return s.SessionStore.EndRun(ctx, session, run)
}

// TestPanickingStoreCallAnsweredOnce: a store call that panics, whichever
// request of the session it serves, gives that request's caller exactly
// one reply, an error, and the session keeps working: the next turn runs
// and commits. The requests are sent as messages to the dispatcher actor
// and a marker turn queued behind them closes the test: a second reply to
// the failed request would reach the collector before the marker's.
func TestPanickingStoreCallAnsweredOnce(t *testing.T) {
	tests := []struct {
		name    string
		panicOn string
		request func(session string) any // nil: a turn
		// inCall: the turn answers, and its call ends in error, not run
		// (the intent is written before a call starts).
		inCall bool
	}{
		{name: "loading the session", panicOn: "LoadSession"},
		{name: "writing the intent", panicOn: "WriteIntent", inCall: true},
		{name: "committing the turn", panicOn: "CommitTurn"},
		{name: "ending a run", panicOn: "EndRun", request: func(s string) any { return &messages.EndRun{Session: s, Run: "r1"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var store *panickyStore
			h := newHarness(t, func(c *Config) {
				store = &panickyStore{SessionStore: c.Store, panicOn: tt.panicOn}
				c.Store = store
			})
			// A first turn loads the session, so every later store call
			// runs on a warm commit actor (LoadSession is armed below only
			// for its own case, on a fresh session).
			session := "s1"
			if tt.panicOn != "LoadSession" {
				h.dispatch(turn(session, "r1", call("w0", "echo", `{"x":"0"}`)))
			}
			store.armed.Store(true)

			var mu sync.Mutex
			var replies []any
			got := make(chan struct{}, 8)
			collector := h.d.root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
				switch m := ctx.Message().(type) {
				case *messages.TurnResult, *messages.Ack:
					mu.Lock()
					replies = append(replies, m)
					mu.Unlock()
					got <- struct{}{}
				}
			}))
			var req any = turn(session, "r1", call("p", "echo", `{"x":"1"}`))
			if tt.request != nil {
				req = tt.request(session)
			}
			h.d.root.RequestWithCustomSender(h.d.PID(), req, collector)
			h.d.root.RequestWithCustomSender(h.d.PID(), turn(session, "r1", call("m", "echo", `{"x":"marker"}`)), collector)
			for i := 0; ; i++ {
				select {
				case <-got:
				case <-time.After(20 * time.Second):
					t.Fatalf("only %d replies", i)
				}
				mu.Lock()
				last := replies[len(replies)-1]
				mu.Unlock()
				if r, ok := last.(*messages.TurnResult); ok && len(r.Messages) == 1 && r.Messages[0].ToolCallId == "m" {
					break
				}
			}
			if store.armed.Load() {
				t.Fatalf("the store never panicked in %s", tt.panicOn)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(replies) != 2 {
				t.Fatalf("%d replies for 2 requests: %v", len(replies), replies)
			}
			switch r := replies[0].(type) {
			case *messages.TurnResult:
				if tt.inCall {
					if r.Error != "" || r.Messages[0].Status != "error" || !strings.Contains(r.Messages[0].Content, "store bug") {
						t.Errorf("the turn whose intent failed: %v", r)
					}
				} else if r.Error == "" {
					t.Errorf("the failed turn's reply has no error: %v", r)
				}
			case *messages.Ack:
				if r.Error == "" {
					t.Errorf("the failed request's reply has no error: %v", r)
				}
			}
			marker := replies[1].(*messages.TurnResult)
			if marker.Error != "" || marker.Messages[0].Status != "ok" {
				t.Fatalf("the next turn: %v", marker)
			}
			// And the session's state is sound: the next turn commits
			// after the marker.
			next := h.dispatch(turn(session, "r1", call("n", "echo", `{"x":"next"}`)))
			if next.Turn != marker.Turn+1 {
				t.Errorf("turn after the marker (%d) is %d", marker.Turn, next.Turn)
			}
		})
	}
}
