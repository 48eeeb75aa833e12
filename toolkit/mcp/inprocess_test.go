package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestInProcessServer attaches go-sdk servers of this process: their tools
// are registered and run like any MCP server's, under the same rules
// (never concurrent; read-only only when trusted and readOnlyHint).
func TestInProcessServer(t *testing.T) {
	type stockIn struct {
		Item string `json:"item"`
	}
	newSrv := func() *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "inventory", Version: "1"}, nil)
		mcp.AddTool(srv, &mcp.Tool{Name: "stock", Description: "Units in stock.",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(_ context.Context, _ *mcp.CallToolRequest, in stockIn) (*mcp.CallToolResult, any, error) {
				return textResult(in.Item + ": 7 units"), nil, nil
			})
		return srv
	}
	h := newHarness(t, []ServerConfig{
		{Name: "trusted", Server: newSrv(), Trusted: true, AlwaysInArray: true},
		{Name: "plain", Server: newSrv()},
	})
	h.start()

	got, err := h.call(context.Background(), "mcp__trusted__stock", `{"item":"bolts"}`)
	if err != nil || got != "bolts: 7 units" {
		t.Errorf("stock = %q, %v", got, err)
	}
	if got, err := h.call(context.Background(), "mcp__plain__stock", `{"item":"nuts"}`); err != nil || got != "nuts: 7 units" {
		t.Errorf("plain stock = %q, %v", got, err)
	}
	tr, pl := h.tool("mcp__trusted__stock"), h.tool("mcp__plain__stock")
	if tr.Concurrent || pl.Concurrent {
		t.Error("an in-process MCP tool is concurrent: MCP tools run alone")
	}
	if !tr.AlwaysInArray || pl.AlwaysInArray {
		t.Errorf("always in the array: %v, %v; want the server's setting", tr.AlwaysInArray, pl.AlwaysInArray)
	}
	if !tr.ReadOnly || pl.ReadOnly {
		t.Errorf("read-only: trusted %v, untrusted %v; want true, false", tr.ReadOnly, pl.ReadOnly)
	}
	// The schema the server inferred is the tool's, and validated like any.
	sch, err := h.reg.Schemas.Compile(tr.Schema)
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(map[string]any{"item": 3}); err == nil || !strings.Contains(err.Error(), "item") {
		t.Errorf("a wrong-typed item: %v; want an error naming it", err)
	}
	var s map[string]any
	if err := json.Unmarshal(tr.Schema, &s); err != nil || s["type"] != "object" {
		t.Errorf("schema %s: %v", tr.Schema, err)
	}
}

func TestInProcessServerConfig(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "x", Version: "1"}, nil)
	for _, c := range []struct {
		cfg  ServerConfig
		want string // "" for valid
	}{
		{ServerConfig{Name: "a", Server: srv}, ""},
		{ServerConfig{Name: "a", Server: srv, Command: []string{"x"}}, "mcp: server: an in-process server takes no command or url"},
		{ServerConfig{Name: "a", Server: srv, URL: "http://127.0.0.1:1/"}, "mcp: server: an in-process server takes no command or url"},
		{ServerConfig{Name: "a", Server: srv, Env: map[string]string{"A": "b"}}, "mcp: server: an in-process server has no environment, working directory or headers"},
	} {
		err := c.cfg.Validate()
		if (err == nil) != (c.want == "") || (err != nil && err.Error() != c.want) {
			t.Errorf("Validate(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
}
