package mcp

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// TestAnnotationsCountOnlyWhenTrusted: a tool's annotations decide its
// flags only for a server the operator marks trusted. For an untrusted
// server every tool, whatever it says, needs approval, runs alone, is
// de-duplicated as a write and shows no hint of the server's; for a trusted
// one readOnlyHint spares the approval (and, with concurrent = true, lets
// the tool run in parallel), idempotentHint false makes every call run and
// destructiveHint is shown with each confirmation. Every tool of a server
// shares its de-duplication scope.
func TestAnnotationsCountOnlyWhenTrusted(t *testing.T) {
	yes, no := true, false
	newSrv := func() *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "annotated", Version: "1"}, nil)
		add := func(name string, a *mcp.ToolAnnotations) {
			mcp.AddTool(srv, &mcp.Tool{Name: name, Description: "A tool.", Annotations: a},
				func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return textResult(name), nil, nil
				})
		}
		add("ro", &mcp.ToolAnnotations{ReadOnlyHint: true})
		add("erase", &mcp.ToolAnnotations{DestructiveHint: &yes})
		add("put", &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &no})
		add("bare", nil)
		return srv
	}
	h := newHarness(t, []ServerConfig{
		{Name: "untrusted", Server: newSrv(), Concurrent: true},
		{Name: "trusted", Server: newSrv(), Trusted: true},
		{Name: "parallel", Server: newSrv(), Trusted: true, Concurrent: true},
	})
	h.start()

	type flags struct {
		ReadOnly, Concurrent, NoDedup bool
		Destructive                   string // "explicit", "default" or ""
	}
	noteKind := func(tool *toolkit.Tool) string {
		switch {
		case tool.ConfirmNote == "":
			return ""
		case strings.Contains(tool.ConfirmNote, "marks this tool destructive"):
			return "explicit"
		case strings.Contains(tool.ConfirmNote, "MCP's default"):
			return "default"
		}
		return "other: " + tool.ConfirmNote
	}
	want := map[string]flags{
		// Untrusted: nothing the server says counts.
		"mcp__untrusted__ro":    {},
		"mcp__untrusted__erase": {},
		"mcp__untrusted__put":   {},
		"mcp__untrusted__bare":  {},
		// Trusted: MCP's defaults for what is left out (not read-only,
		// not idempotent, destructive).
		"mcp__trusted__ro":    {ReadOnly: true},
		"mcp__trusted__erase": {NoDedup: true, Destructive: "explicit"},
		"mcp__trusted__put":   {},
		"mcp__trusted__bare":  {NoDedup: true, Destructive: "default"},
		// concurrent = true: only the read-only tools of a trusted server.
		"mcp__parallel__ro":    {ReadOnly: true, Concurrent: true},
		"mcp__parallel__erase": {NoDedup: true, Destructive: "explicit"},
	}
	for name, w := range want {
		tool := h.tool(name)
		got := flags{ReadOnly: tool.IsReadOnly(toolkit.Args{}), Concurrent: tool.Concurrent, NoDedup: tool.NoDedup, Destructive: noteKind(tool)}
		if got != w {
			t.Errorf("%s: %+v, want %+v", name, got, w)
		}
		server := strings.Split(name, "__")[1]
		if tool.DedupScope != "mcp__"+server+"__" {
			t.Errorf("%s: de-duplication scope %q, want mcp__%s__", name, tool.DedupScope, server)
		}
	}
	if note := h.tool("mcp__trusted__erase").ConfirmNote; !strings.Contains(note, `"trusted"`) {
		t.Errorf("the destructive note does not name the server: %q", note)
	}
}
