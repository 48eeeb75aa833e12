package service

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// echoTool answers ok to any padding.
var echoTool = toolkit.Tool{Name: "pad", Description: "Counts its padding.", Concurrent: true, ReadOnly: true, NoDedup: true,
	Schema: []byte(`{"type":"object","properties":{"pad":{"type":"string"}},"additionalProperties":false}`),
	Handler: func(_ context.Context, c *toolkit.Call) (toolkit.Result, error) {
		return toolkit.Result{Content: "ok"}, nil
	}}

// padCalls are n calls of pad, each with per bytes of padding made of
// quotes, which JSON escapes to twice their size.
func padCalls(t *testing.T, n, per int) []map[string]any {
	t.Helper()
	calls := make([]map[string]any, n)
	for i := range calls {
		calls[i] = call(t, "p"+string(rune('a'+i)), "pad", map[string]any{"pad": strings.Repeat(`"`, per)})
	}
	return calls
}

// TestServiceTakesTurnsUpToTheTurnLimit: a turn within the documented turn
// limit (64 MiB of arguments) is not refused by the service's body limit:
// five calls of 0.9 MiB of arguments, whose quotes JSON escapes, a body of
// about 9 MiB.
func TestServiceTakesTurnsUpToTheTurnLimit(t *testing.T) {
	f := newFixture(t, fixtureOpts{tools: []toolkit.Tool{echoTool}})
	resp, body := f.do("POST", "/v1/sessions/limit-s/turns", turn("r1", "all", padCalls(t, 5, 900<<10)...))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a turn of 4.4 MiB of arguments: %d %s", resp.StatusCode, body)
	}
}
