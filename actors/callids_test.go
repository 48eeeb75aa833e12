package actors

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// TestMadeUpIDsFollowThePairingRule: a call without an id gets the id the
// messages codec would give it (call_N, or call_N_2… when the turn carries
// call_N already), so a turn sent without the codec (an embedder's) never
// has a made-up id taken for a repeat of a given one.
func TestMadeUpIDsFollowThePairingRule(t *testing.T) {
	h := newHarness(t, nil)
	r := h.dispatch(turn("s1", "r1",
		call("", "echo", `{"x":"1"}`),
		call("call_1", "echo", `{"x":"2"}`),
		call(" ", "echo", `{"x":"3"}`)))
	want := []string{"call_1_2=ok", "call_1=ok", "call_3=ok"}
	if diff := cmp.Diff(want, statuses(r)); diff != "" {
		t.Fatalf("statuses (-want +got):\n%s", diff)
	}
	// The codec gives the same ids to the same calls.
	m := &messages.AssistantMessage{ToolCalls: []*messages.ToolCall{
		call("", "echo", `{}`), call("call_1", "echo", `{}`), call(" ", "echo", `{}`)}}
	if diff := cmp.Diff([]string{"call_1_2", "call_1", "call_3"}, messages.CallIDs(m.ToolCalls)); diff != "" {
		t.Errorf("messages.CallIDs (-want +got):\n%s", diff)
	}
}

// TestTurnIDReplayUnderConfiguredLimits: a turn id replays the same calls
// whatever their JSON spacing, also when their arguments are only within
// the configured limits (deeper than the default 64 levels): the calls'
// hash is taken from the parse pass 1 makes, with Config.Limits.
func TestTurnIDReplayUnderConfiguredLimits(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Limits = toolkit.Limits{MaxDepth: 128}
		c.Registry.Register(toolkit.Tool{Name: "deep", Description: "Takes anything.", Concurrent: true, ReadOnly: true,
			Schema: json.RawMessage(`{"type":"object"}`),
			Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) {
				return toolkit.Result{Content: "deep"}, nil
			}})
	})
	nested := strings.Repeat("[", 80) + strings.Repeat("]", 80)
	first := turn("s1", "r1", call("d1", "deep", `{"x":`+nested+`}`))
	first.TurnId = "t-deep"
	r1 := h.dispatch(first)
	if diff := cmp.Diff([]string{"d1=ok"}, statuses(r1)); diff != "" {
		t.Fatalf("first dispatch (-want +got):\n%s", diff)
	}
	again := turn("s1", "r1", call("d1", "deep", `{ "x" : `+nested+` }`))
	again.TurnId = "t-deep"
	r2, err := h.d.Dispatch(context.Background(), again)
	if errors.Is(err, ErrTurnIDConflict) {
		t.Fatalf("the same calls, spaced otherwise, were refused as other calls: %v", err)
	}
	if err != nil || !r2.Replayed || r2.Turn != r1.Turn {
		t.Fatalf("replay: %+v, %v", r2, err)
	}
}
