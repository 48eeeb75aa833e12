package interact_test

import (
	"context"
	"sync"
	"testing"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/interact"
)

// Through a real dispatcher: ask_user's question reaches the event stream,
// the answer comes back through Dispatcher.Answer; without anyone listening
// the call is skipped.
func TestAskUserThroughDispatcher(t *testing.T) {
	tests := []struct {
		name       string
		listen     bool
		answer     string
		declined   bool
		wantStatus string
		want       string
	}{
		{name: "answered", listen: true, answer: "PostgreSQL", wantStatus: "ok", want: "The user answered: PostgreSQL"},
		{name: "declined", listen: true, declined: true, wantStatus: "skipped"},
		{name: "nobody listening", listen: false, wantStatus: "skipped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := toolkit.NewRegistry()
			toolkit.RegisterMeta(reg)
			interact.Register(reg, interact.Deps{})
			store := cachestore.NewMemory()
			defer store.Close()
			questions := make(chan *messages.Event, 1)
			cfg := actors.Config{Registry: reg, Store: store}
			if tt.listen {
				cfg.Events = func(ev *messages.Event) {
					if ev.Kind == toolkit.QuestionText {
						questions <- ev
					}
				}
			}
			d, err := actors.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close(context.Background())

			var wg sync.WaitGroup
			var res *messages.TurnResult
			var dispatchErr error
			wg.Go(func() {
				res, dispatchErr = d.Dispatch(context.Background(), &messages.DispatchTurn{
					Session: "s1", Run: "r1", Provider: "openai",
					Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: []*messages.ToolCall{
						{Id: "c1", Type: "function", Function: &messages.FunctionCall{Name: "ask_user", Arguments: `{"question":"Which database?"}`}},
					}},
				})
			})
			if tt.listen {
				ev := <-questions
				if ev.Text != "Which database?" || ev.CallId != "c1" {
					t.Errorf("question event: %v", ev)
				}
				if err := d.Answer(context.Background(), "s1", ev.CallId, tt.answer, tt.declined); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			if dispatchErr != nil {
				t.Fatal(dispatchErr)
			}
			m := res.Messages[0]
			if m.Status != tt.wantStatus || (tt.want != "" && m.Content != tt.want) {
				t.Errorf("got %s %q, want %s %q", m.Status, m.Content, tt.wantStatus, tt.want)
			}
		})
	}
}
