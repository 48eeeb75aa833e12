package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// elicitTool registers a tool that passes on a request for input
// (toolkit.QuestionElicit) whose answer must be {"n": integer}.
func elicitTool(cfg *Config) {
	cfg.Registry.Register(toolkit.Tool{Name: "mcp__srv__ask", Description: "Asks for a number.", Schema: json.RawMessage(objSchema),
		ReadOnly: true, Source: toolkit.SourceMCP,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			a, err := c.Ask(ctx, toolkit.Question{Kind: toolkit.QuestionElicit, Text: "Pick a number.",
				Schema: []byte(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
				Note:   `Asked by MCP server "srv".`,
				Validate: func(a toolkit.Answer) error {
					var v struct{ N *int }
					if json.Unmarshal([]byte(a.Text), &v) != nil || v.N == nil {
						return errors.New(`field "n": want integer`)
					}
					return nil
				}})
			switch {
			case err != nil:
				return toolkit.Result{Content: "declined: " + err.Error()}, nil
			case a.Declined:
				return toolkit.Result{Content: "declined by the person"}, nil
			}
			return toolkit.Result{Content: "got " + a.Text}, nil
		}})
}

// TestElicitationQuestion: a request for input is an "elicitation" event
// carrying the schema (arguments) and who asks (note); an answer that does
// not match is refused with ErrInvalidAnswer and the question keeps
// waiting, a matching one reaches the tool.
func TestElicitationQuestion(t *testing.T) {
	h := newHarness(t, elicitTool)
	asked := make(chan *messages.Event, 1)
	h.mu.Lock()
	h.onEv = func(e *messages.Event) {
		if e.Kind == toolkit.QuestionElicit {
			asked <- e
		}
	}
	h.mu.Unlock()
	done := make(chan *messages.TurnResult, 1)
	go func() { done <- h.dispatch(turn("s1", "r1", call("a1", "mcp__srv__ask", `{}`))) }()
	e := <-asked
	if e.Text != "Pick a number." || !strings.Contains(e.Arguments, `"required":["n"]`) || e.Note != `Asked by MCP server "srv".` {
		t.Errorf("event = %+v; want the message, the schema and the note", e)
	}
	ctx := context.Background()
	err := h.d.Answer(ctx, "s1", "a1", `{"n":"seven"}`, false)
	if !errors.Is(err, ErrInvalidAnswer) || !strings.Contains(err.Error(), `field "n": want integer`) {
		t.Fatalf("a wrong answer: %v; want ErrInvalidAnswer naming the field", err)
	}
	if err := h.d.Answer(ctx, "s1", "a1", `{"n":7}`, false); err != nil {
		t.Fatalf("the right answer after a wrong one: %v", err)
	}
	r := <-done
	if diff := cmp.Diff([]string{"a1=ok"}, statuses(r)); diff != "" || r.Messages[0].Content != `got {"n":7}` {
		t.Errorf("result %v %q (-want +got):\n%s", statuses(r), r.Messages[0].Content, diff)
	}
}

// TestElicitationWaitsAtMostTheConfirmTimeout: nobody answering a request
// for input within the confirmation timeout declines it, however long the
// call may run; with nobody listening at all it is declined at once.
func TestElicitationWaitsAtMostTheConfirmTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		settleBubble(t)
		const wait = 9 * time.Second
		h := newHarness(t, func(c *Config) {
			elicitTool(c)
			c.ConfirmTimeout = wait
		})
		start := time.Now()
		r := h.dispatch(turn("s1", "r1", call("a1", "mcp__srv__ask", `{}`)))
		if d := time.Since(start); d != wait {
			t.Errorf("the question waited %v, want the confirm timeout %v", d, wait)
		}
		if got := r.Messages[0].Content; got != "declined: "+context.DeadlineExceeded.Error() {
			t.Errorf("content = %q; want the question given up at the timeout", got)
		}
	})
	h := newHarness(t, func(c *Config) {
		elicitTool(c)
		c.Events = nil
	})
	r := h.dispatch(turn("s1", "r1", call("a1", "mcp__srv__ask", `{}`)))
	if got, want := r.Messages[0].Content, fmt.Sprint("declined: ", toolkit.ErrNobodyToAsk); got != want {
		t.Errorf("with nobody listening: %q, want %q", got, want)
	}
}

// TestElicitationAfterTheTurnIsDeclinedAtOnce: a deferred call approved
// after its turn ended asks for input: nobody waits on that turn, so the
// request is declined at once (its event still sent, marked declined)
// and the call ends with its own result (run's NobodyAnswers:
// cmd/tooldispatch TestRunMCPElicitationIsDeclined).
func TestElicitationAfterTheTurnIsDeclinedAtOnce(t *testing.T) {
	events := make(chan *messages.Event, 64)
	cfg := Config{Registry: toolkit.NewRegistry(), Store: cachestore.NewMemory(), ConfirmTimeout: time.Hour,
		Events: func(e *messages.Event) { events <- e }}
	cfg.Registry.Register(toolkit.Tool{Name: "mcp__srv__ask", Description: "Asks, and changes things.", Schema: json.RawMessage(objSchema),
		Source: toolkit.SourceMCP,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			_, err := c.Ask(ctx, toolkit.Question{Kind: toolkit.QuestionElicit, Text: "Pick a number.", Schema: []byte(`{"type":"object"}`),
				Note: `Asked by MCP server "srv".`})
			return toolkit.Result{Content: fmt.Sprint("own result; asked: ", err)}, nil
		}})
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	tr := turn("s", "r", call("a1", "mcp__srv__ask", `{}`))
	tr.Approve, tr.Confirm = ApproveAsk, ConfirmDefer
	r, err := d.Dispatch(ctx, tr)
	if err != nil || r.Messages[0].Status != string(toolkit.StatusAwaitingApproval) {
		t.Fatalf("the deferred turn: %v, %v", r, err)
	}
	var hash string
	for hash == "" {
		if e := <-events; e.Kind == EventToolConfirm {
			hash = e.ArgsHash
		}
	}
	if _, err := d.Confirm(ctx, &messages.ConfirmReply{Session: "s", CallId: "a1", ArgsHash: hash, Approve: true}); err != nil {
		t.Fatal(err)
	}
	var elicit, result *messages.Event
	for result == nil {
		switch e := <-events; e.Kind {
		case toolkit.QuestionElicit:
			elicit = e
		case EventToolResult:
			if e.Status != string(toolkit.StatusAwaitingApproval) {
				result = e
			}
		}
	}
	if elicit == nil || elicit.Status != ElicitDeclined || !strings.Contains(elicit.Note, `MCP server "srv"`) || !strings.Contains(elicit.Note, "nobody can answer") {
		t.Errorf("elicitation event %+v; want it sent, marked declined, saying why", elicit)
	}
	if want := fmt.Sprint("own result; asked: ", toolkit.ErrNobodyToAsk); result.Status != string(toolkit.StatusOK) || !strings.Contains(result.Text, want) {
		t.Errorf("the approved call: %s %q; want ok with %q", result.Status, result.Text, want)
	}
}
