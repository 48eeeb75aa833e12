package actors

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// matchSchema has a pattern every item of slowItems runs past its bound on.
const matchSchema = `{"type":"object","properties":{"items":{"type":"array","items":{"type":"string","pattern":"^(a+)+$"}}}}`

// slowItems is the arguments text of n distinct items whose pattern match
// each runs past its bound.
func slowItems(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = strings.Repeat("a", 40) + "!" + strconv.Itoa(i)
	}
	b, _ := json.Marshal(map[string]any{"items": items})
	return string(b)
}

// TestCancelStopsPatternMatching: a turn canceled (by its caller, or by a
// shutdown signal) while pass 1 matches a call's patterns stops matching:
// the call ends canceled instead of invalid_args after every item was
// matched, and the call after it does not run.
func TestCancelStopsPatternMatching(t *testing.T) {
	for _, how := range []string{"caller", "shutdown"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t, func(c *Config) {
				// Budgets far beyond the test: only the cancellation can
				// stop matching early.
				c.Registry = matchRegistry(toolkit.WithRegexTimeout(10*time.Millisecond), toolkit.WithMatchBudgets(time.Hour, time.Hour))
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			matching := make(chan struct{}, 1)
			h.mu.Lock()
			h.onEv = func(e *messages.Event) {
				if e.Kind == EventToolCall && e.CallId == "slow" {
					matching <- struct{}{}
				}
			}
			h.mu.Unlock()
			go func() {
				<-matching
				if how == "caller" {
					cancel()
				} else {
					h.d.Cancel()
				}
			}()
			r, err := h.d.Dispatch(ctx, turn("s1", "r1",
				call("slow", "match", slowItems(400)),
				call("after", "echo", `{"x":"1"}`)))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"slow=canceled", "after=canceled"}, statuses(r)); diff != "" {
				t.Fatalf("statuses (-want +got):\n%s\n%.300s", diff, r.Messages[0].Content)
			}
		})
	}
}

// matchRegistry registers match (matchSchema) and echo in a registry whose
// schema cache has these options.
func matchRegistry(opts ...toolkit.SchemaOption) *toolkit.Registry {
	reg := toolkit.NewRegistry(opts...)
	toolkit.RegisterMeta(reg)
	reg.Register(toolkit.Tool{Name: "match", Description: "Matches patterns.", Schema: json.RawMessage(matchSchema),
		Concurrent: true, ReadOnly: true,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			return toolkit.Result{Content: "matched"}, nil
		}})
	reg.Register(toolkit.Tool{Name: "echo", Description: "Echo.", Schema: json.RawMessage(objSchema),
		Concurrent: true, ReadOnly: true,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			return toolkit.Result{Content: "echo"}, nil
		}})
	return reg
}

// TestTurnMatchBudget: the calls of one turn share its pattern-matching
// budget. Once the first call spent it, the second is refused without a
// match; a call without patterns still runs, and the next turn has a
// budget of its own.
func TestTurnMatchBudget(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Registry = matchRegistry(toolkit.WithRegexTimeout(10*time.Millisecond), toolkit.WithMatchBudgets(time.Hour, 300*time.Millisecond))
	})
	// Arguments that validate load the schema (AutoLoadSchemas).
	r := h.dispatch(turn("s1", "r1", call("load", "match", `{"items":["a"]}`)))
	if diff := cmp.Diff([]string{"load=ok"}, statuses(r)); diff != "" {
		t.Fatalf("loading turn (-want +got):\n%s", diff)
	}
	r = h.dispatch(turn("s1", "r1",
		call("first", "match", slowItems(400)),
		call("second", "match", slowItems(3)),
		call("plain", "echo", `{"x":"1"}`)))
	if diff := cmp.Diff([]string{"first=invalid_args", "second=invalid_args", "plain=ok"}, statuses(r)); diff != "" {
		t.Fatalf("statuses (-want +got):\n%s", diff)
	}
	for _, m := range r.Messages[:2] {
		if !strings.Contains(m.Content, "this turn's budget for matching schema patterns (300ms) is spent") {
			t.Errorf("%s: %.300s, want the turn's budget named", m.ToolCallId, m.Content)
		}
	}
	if strings.Contains(r.Messages[1].Content, "could not be checked") {
		t.Errorf("second: %.300s; nothing should have been matched after the budget was spent", r.Messages[1].Content)
	}
	r = h.dispatch(turn("s1", "r1", call("next", "match", `{"items":["aaa","ab"]}`)))
	if diff := cmp.Diff([]string{"next=invalid_args"}, statuses(r)); diff != "" {
		t.Fatalf("next turn (-want +got):\n%s", diff)
	}
	if want := "must match pattern `^(a+)+$`, got \"ab\""; !strings.Contains(r.Messages[0].Content, want) {
		t.Errorf("next turn: %s, want %s: a fresh budget matches again", r.Messages[0].Content, want)
	}
}
