package actors

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

const redactValue = "s3cret-VALUE-5d8e2a"

// redactHarness is a harness whose dispatcher redacts redactValue (as K),
// with tools that stream it split, fail with it at the event's cap, and
// return what the call's own redactor makes of it.
func redactHarness(t *testing.T) *harness {
	t.Helper()
	return newHarness(t, func(c *Config) {
		c.Redactor = secrets.NewRedactor(map[string]string{"K": redactValue})
		c.Registry.Register(toolkit.Tool{Name: "stream", Description: "Streams the value in pieces.", Concurrent: true, ReadOnly: true,
			Handler: func(_ context.Context, c *toolkit.Call) (toolkit.Result, error) {
				c.Emit("a secret: " + redactValue[:4])
				c.Emit(redactValue[4:] + " end\n")
				c.Emit("tail " + redactValue[:3])
				return toolkit.Result{Content: "done"}, nil
			}})
		c.Registry.Register(toolkit.Tool{Name: "loud", Description: "Fails with the value where the event cuts.", Concurrent: true, ReadOnly: true,
			Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) {
				return toolkit.Result{}, errors.New(strings.Repeat(".", maxEventText-5) + redactValue)
			}})
		c.Registry.Register(toolkit.Tool{Name: "own", Description: "Redacts with the call's redactor.", Concurrent: true, ReadOnly: true,
			Handler: func(_ context.Context, c *toolkit.Call) (toolkit.Result, error) {
				if c.Redactor == nil {
					return toolkit.Result{}, errors.New("the call has no redactor")
				}
				return toolkit.Result{Content: "own " + c.Redact(redactValue)}, nil
			}})
	})
}

// TestStreamedTextIsRedactedAcrossPieces: a secret split over two pieces
// of streamed output is redacted whole; what was held back as a possible
// secret's start is streamed when the call ends, before tool_call_end.
func TestStreamedTextIsRedactedAcrossPieces(t *testing.T) {
	h := redactHarness(t)
	r := h.dispatch(turn("s1", "r1", call("c1", "stream", `{}`)))
	if r.Messages[0].Status != "ok" {
		t.Fatalf("%+v", r.Messages[0])
	}
	h.mu.Lock()
	var texts []string
	for _, e := range h.events {
		if e.Kind == EventToolCallText {
			texts = append(texts, e.Text)
		}
	}
	h.mu.Unlock()
	if diff := cmp.Diff([]string{"a secret: ", "[secret:K] end\n", "tail ", redactValue[:3]}, texts); diff != "" {
		t.Errorf("streamed pieces (-want +got):\n%s", diff)
	}
	kinds := h.eventKinds("c1")
	last := -1
	for i, k := range kinds {
		if k == EventToolCallText {
			last = i
		}
	}
	if end := indexOf(kinds, EventToolCallEnd); end < 0 || last > end {
		t.Errorf("events %v: streamed text after tool_call_end", kinds)
	}
}

// TestEventTextIsRedactedBeforeItIsCut: an error whose text holds the
// secret where the event's cap falls: the exec_error event carries no
// part of it, and the cut does not split the marker.
func TestEventTextIsRedactedBeforeItIsCut(t *testing.T) {
	h := redactHarness(t)
	r := h.dispatch(turn("s1", "r1", call("c1", "loud", `{}`), call("c2", "own", `{}`)))
	if m := r.Messages[0]; m.Status != "error" || !strings.Contains(m.Content, "[secret:K]") || strings.Contains(m.Content, redactValue[:6]) {
		t.Errorf("tool message: %s %.80q", m.Status, m.Content[max(0, len(m.Content)-80):])
	}
	if m := r.Messages[1]; m.Status != "ok" || m.Content != "own [secret:K]" {
		t.Errorf("the call's redactor: %s %q", m.Status, m.Content)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := false
	for _, e := range h.events {
		if e.CallId != "c1" || (e.Kind != EventExecError && e.Kind != EventToolResult) {
			continue
		}
		seen = true
		if strings.Contains(e.Text, redactValue[:4]) || strings.Count(e.Text, "[secret:") != strings.Count(e.Text, "[secret:K]") {
			t.Errorf("%s event ends %q", e.Kind, e.Text[max(0, len(e.Text)-30):])
		}
		if !strings.HasSuffix(e.Text, "…") || len(e.Text) > maxEventText+len("…") {
			t.Errorf("%s event text of %d bytes, not cut at %d", e.Kind, len(e.Text), maxEventText)
		}
	}
	if !seen {
		t.Error("no exec_error or tool_result event for c1")
	}
}

func indexOf(kinds []string, k string) int {
	for i, x := range kinds {
		if x == k {
			return i
		}
	}
	return -1
}
