package attack

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
	tdmcp "github.com/tooldispatch/tooldispatch/toolkit/mcp"
	"github.com/tooldispatch/tooldispatch/toolkit/web"
)

// minFragment is the shortest piece of the secret counted as a leak: every
// piece of secretValue this long is unlike anything else the tools print.
const minFragment = 5

// fragmentOf returns the longest piece (at least minFragment bytes) of
// value that text holds, or "".
func fragmentOf(text, value string) string {
	for n := len(value); n >= minFragment; n-- {
		for i := 0; i+n <= len(value); i++ {
			if strings.Contains(text, value[i:i+n]) {
				return value[i : i+n]
			}
		}
	}
	return ""
}

// brokenMarker reports whether text holds the start of a redaction marker
// without its end (a cut inside "[secret:API_KEY]").
func brokenMarker(text string) bool {
	return strings.Count(text, "[secret:") != strings.Count(text, "[secret:API_KEY]")
}

// TestAttackSecretCutPrefix: a tool's output holds the secret exactly where
// something cuts it (the tool's own cap, the event's cap, a chaos
// truncation), or the secret arrives split over two streamed chunks. No
// piece of it may reach the model or an event: output is redacted whole
// before it is cut, and a cut never lands inside a marker.
func TestAttackSecretCutPrefix(t *testing.T) {
	const mcpCap = 4096
	var mu sync.Mutex
	var events []*messages.Event
	var mgr *tdmcp.Manager
	e := newEnvWith(t, web.Config{}, func(cfg *actors.Config) {
		cfg.Events = func(ev *messages.Event) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
		schema := json.RawMessage(`{"type":"object"}`)
		// The secret straddles the two chunks of a stream.
		cfg.Registry.Register(toolkit.Tool{Name: "stream_split", Description: "streams a value in two chunks", Schema: schema, ReadOnly: true,
			Handler: func(_ context.Context, c *toolkit.Call) (toolkit.Result, error) {
				c.Emit("token: " + secretValue[:9])
				c.Emit(secretValue[9:] + " done\n")
				return toolkit.Result{Content: "streamed"}, nil
			}})
		// An error whose text is cut at the event's cap inside the secret.
		cfg.Registry.Register(toolkit.Tool{Name: "long_error", Description: "fails with a long message", Schema: schema, ReadOnly: true,
			Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) {
				return toolkit.Result{}, errors.New(strings.Repeat(".", 4096-9) + secretValue)
			}})
		// Output that a chaos truncation cuts inside the secret.
		padded := strings.Repeat(".", 100) + secretValue + strings.Repeat(".", 100)
		cfg.Registry.Register(toolkit.Tool{Name: "chaos_cut", Description: "prints a value", Schema: schema, ReadOnly: true,
			Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) {
				return toolkit.Result{Content: padded}, nil
			}})
		cfg.Chaos = &chaos.Policy{Seed: 1, Rules: []chaos.Rule{{Tools: []string{"chaos_cut"},
			Faults: []chaos.Fault{{Kind: chaos.KindTruncate, Probability: 1, Fraction: float64(100+9) / float64(len(padded))}}}}}
		// An MCP server whose result is cut at its cap inside the secret.
		srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
		mcp.AddTool(srv, &mcp.Tool{Name: "big", Description: "a long result"},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				text := strings.Repeat(".", mcpCap-9) + secretValue + strings.Repeat(".", 100)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
			})
		mgr = tdmcp.NewManager(cfg.Registry, []tdmcp.ServerConfig{{Name: "echo", Server: srv, MaxResultBytes: mcpCap}}, cfg.Logger)
		if err := mgr.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { _ = mgr.Close() })
	// run_command keeps the head and the tail of its output: the head ends
	// inside the secret.
	head := builtinHead
	file := strings.Repeat("a", head-9) + secretValue + strings.Repeat("b", 3*head)
	if err := os.WriteFile(filepath.Join(e.ws, "big.txt"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}

	r := e.dispatch("all",
		call("stream", "stream_split", `{}`),
		call("error", "long_error", `{}`),
		call("chaos", "chaos_cut", `{}`),
		call("mcp", "mcp__echo__big", `{}`),
		call("cmd", "run_command", `{"argv":["cat","big.txt"]}`),
	)
	for _, m := range r.Messages {
		if f := fragmentOf(m.Content, secretValue); f != "" {
			t.Errorf("%s (%s): the tool message holds %q of the secret: …%.120q", m.ToolCallId, m.Status, f, tail(m.Content, f))
		}
		if brokenMarker(m.Content) {
			t.Errorf("%s: a cut landed inside a redaction marker", m.ToolCallId)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	streamed := map[string]string{}
	for _, ev := range events {
		if f := fragmentOf(ev.Text, secretValue); f != "" {
			t.Errorf("event %s of %s holds %q of the secret: …%.120q", ev.Kind, ev.CallId, f, tail(ev.Text, f))
		}
		if ev.Kind == "tool_call_text" {
			streamed[ev.CallId] += ev.Text
		}
	}
	for id, text := range streamed {
		if f := fragmentOf(text, secretValue); f != "" {
			t.Errorf("the streamed text of %s, joined, holds %q of the secret", id, f)
		}
		if brokenMarker(text) {
			t.Errorf("the streamed text of %s splits a redaction marker", id)
		}
	}
	if got := streamed["stream"]; !strings.Contains(got, "token: [secret:API_KEY] done") {
		t.Errorf("the split secret was not streamed redacted: %q", got)
	}
}

// builtinHead is how much of its output's head run_command keeps (half of
// its default output cap).
const builtinHead = 64 << 10 / 2

// tail returns the text around the first occurrence of f.
func tail(text, f string) string {
	i := strings.Index(text, f)
	return text[max(0, i-40):min(len(text), i+len(f)+40)]
}
