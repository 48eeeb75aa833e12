package actors

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

// TestConfirmShowsItsTurn: a tool_confirm carries the model's own text of
// its turn and the calls after it that are not checked yet, with whether
// each would ask (run_tool unwrapped, a read-only call not), redacted; the
// next confirmation lists only what still follows it.
func TestConfirmShowsItsTurn(t *testing.T) {
	const secret = "hunter2-the-stored-value"
	h := newHarness(t, func(c *Config) {
		c.Redactor = secrets.NewRedactor(map[string]string{"API_KEY": secret})
	})
	confirms := make(chan *messages.Event, 4)
	h.mu.Lock()
	h.onEv = func(e *messages.Event) {
		if e.Kind == EventToolConfirm {
			confirms <- e
		}
	}
	h.mu.Unlock()
	tr := turn("s1", "r1",
		call("w1", "write", `{"path":"x"}`),
		call("e1", "echo", `{"x":"`+secret+`"}`),
		call("w2", "run_tool", `{"name":"write","arguments":{"path":"y"}}`),
		call(" ", "write", `not json`))
	tr.Approve = ApproveAsk
	tr.Message.Content = "  I will write x and y; the key is " + secret + ".  "
	done := make(chan *messages.TurnResult, 1)
	go func() { done <- h.dispatch(tr) }()

	e := <-confirms
	if e.CallId != "w1" {
		t.Fatalf("first confirmation for %s", e.CallId)
	}
	if strings.Contains(e.TurnText, secret) || !strings.HasPrefix(e.TurnText, "I will write x and y; the key is ") {
		t.Errorf("turn_text = %q, want the model's text, trimmed and redacted", e.TurnText)
	}
	type up struct {
		ID, Tool string
		Asks     bool
	}
	var got []up
	for _, u := range e.Upcoming {
		got = append(got, up{u.CallId, u.Tool, u.Asks})
		if strings.Contains(u.Arguments, secret) {
			t.Errorf("upcoming %s shows the secret: %s", u.CallId, u.Arguments)
		}
	}
	want := []up{{"e1", "echo", false}, {"w2", "write", true}, {"call_4", "write", false}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("upcoming of w1 (-want +got):\n%s", diff)
	}
	if a := e.Upcoming[1].GetArguments(); a != `{"path":"y"}` {
		t.Errorf("w2's arguments = %s, want run_tool's inner arguments", a)
	}
	ctx := context.Background()
	if ack, err := h.d.Confirm(ctx, &messages.ConfirmReply{Session: "s1", CallId: "w1", ArgsHash: e.ArgsHash, Approve: true}); err != nil || ack.Status != "accepted" {
		t.Fatalf("approving w1: %v %v", ack, err)
	}
	e2 := <-confirms
	if e2.CallId != "w2" || len(e2.Upcoming) != 1 || e2.Upcoming[0].CallId != "call_4" || e2.TurnText != e.TurnText {
		t.Fatalf("second confirmation %v", e2)
	}
	if ack, err := h.d.Confirm(ctx, &messages.ConfirmReply{Session: "s1", CallId: "w2", ArgsHash: e2.ArgsHash}); err != nil || ack.Status != "accepted" {
		t.Fatalf("denying w2: %v %v", ack, err)
	}
	r := <-done
	if diff := cmp.Diff([]string{"w1=ok", "e1=ok", "w2=skipped", "call_4=invalid_args"}, statuses(r)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
