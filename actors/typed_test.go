package actors

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

type forecastIn struct {
	City string `json:"city" jsonschema:"the city"`
	Days int    `json:"days,omitempty"`
}

type forecastOut struct {
	City string `json:"city"`
	Days int    `json:"days"`
}

// typedHarness registers a typed tool, "forecast", and the same tool marked
// AlwaysInArray, "forecast_pinned".
func typedHarness(t *testing.T) (*harness, *[]forecastIn) {
	var seen []forecastIn
	fn := func(ctx context.Context, in forecastIn) (forecastOut, error) {
		seen = append(seen, in) // sequential tool: calls never overlap
		toolkit.Progress(ctx, "forecasting "+in.City)
		return forecastOut(in), nil
	}
	h := newHarness(t, func(c *Config) {
		c.Registry.Register(toolkit.Typed(toolkit.Tool{Name: "forecast", Description: "Forecast.", ReadOnly: true}, fn))
		c.Registry.Register(toolkit.Typed(toolkit.Tool{Name: "forecast_pinned", Description: "Forecast.", ReadOnly: true,
			AlwaysInArray: true}, fn))
	})
	return h, &seen
}

func TestTypedToolThroughDispatcher(t *testing.T) {
	h, seen := typedHarness(t)
	r := h.dispatch(turn("s1", "r1", call("c1", "forecast", `{"days":2,"city":"Oslo"}`)))
	if diff := cmp.Diff([]string{"c1=ok"}, statuses(r)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if got := r.Messages[0].Content; got != `{"city":"Oslo","days":2}` {
		t.Errorf("content %s", got)
	}
	// The schema is fetched now: wrong arguments are invalid_args.
	r = h.dispatch(turn("s1", "r1", call("c2", "forecast", `{"city":5}`), call("c3", "forecast", `{"days":1}`)))
	if diff := cmp.Diff([]string{"c2=invalid_args", "c3=invalid_args"}, statuses(r)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if got := r.Messages[0].Content; !strings.Contains(got, `field "city": want string`) {
		t.Errorf("a wrong-typed field's message does not name it and its type: %s", got)
	}
	if got := r.Messages[1].Content; !strings.Contains(got, `required field "city"`) {
		t.Errorf("a missing required field's message does not name it: %s", got)
	}
	if diff := cmp.Diff([]forecastIn{{City: "Oslo", Days: 2}}, *seen); diff != "" {
		t.Errorf("handler saw (-want +got):\n%s", diff)
	}
	h.mu.Lock()
	var texts []string
	for _, e := range h.events {
		if e.Kind == EventToolCallText {
			texts = append(texts, e.CallId+":"+e.Text)
		}
	}
	h.mu.Unlock()
	if diff := cmp.Diff([]string{"c1:forecasting Oslo"}, texts); diff != "" {
		t.Errorf("progress events (-want +got):\n%s", diff)
	}
}

func TestAlwaysInArrayUnderLazyPolicy(t *testing.T) {
	h, _ := typedHarness(t)
	lazy := func(run string, calls ...*messages.ToolCall) *messages.DispatchTurn {
		tr := turn("s1", run, calls...)
		tr.Provider, tr.AutoLoadSchemas = "", false
		return tr
	}
	r := h.dispatch(lazy("r1", call("c1", "forecast", `{"city":"Oslo"}`), call("c2", "forecast_pinned", `{"city":"Oslo"}`),
		call("c3", "forecast_pinned", `{"city":7}`)))
	if diff := cmp.Diff([]string{"c1=deferred", "c2=ok", "c3=invalid_args"}, statuses(r)); diff != "" {
		t.Fatalf("default provider (-want +got):\n%s", diff)
	}
	// Under "all" (and its alias claude-code) the pinned tool is listed like
	// every tool, and its schema is handed over by its first call.
	for _, provider := range []string{toolkit.ArrayAll, toolkit.ProviderClaudeCode} {
		tr := lazy("r-"+provider, call("c1", "forecast_pinned", `{"city":"Oslo"}`))
		tr.Provider = provider
		r := h.dispatch(tr)
		if diff := cmp.Diff([]string{"c1=schema_returned"}, statuses(r)); diff != "" {
			t.Fatalf("%s (-want +got):\n%s", provider, diff)
		}
	}
}
