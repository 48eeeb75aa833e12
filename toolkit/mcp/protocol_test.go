package mcp

import (
	"testing"
)

// TestProtocolRevisions: the client offers the newest revision go-sdk
// speaks and takes what the server answers. A go-sdk server (in process)
// speaks 2026-07-28 with it; server-everything, whose TypeScript SDK knows
// revisions up to 2025-11-25, speaks 2025-11-25. Each server's revision is
// in its status (tools --all: mcp_servers[].protocol), and both serve.
func TestProtocolRevisions(t *testing.T) {
	h := newHarness(t, []ServerConfig{
		{Name: "asker", Server: elicitingServer()},
		{Name: "everything", Command: serverCommand(t, "server-everything", "stdio")},
	})
	h.start()
	got := map[string]string{}
	for _, st := range h.m.Servers() {
		got[st.Name] = st.Protocol
	}
	if got["asker"] != "2026-07-28" || got["everything"] != "2025-11-25" {
		t.Errorf("protocol revisions = %v; want asker 2026-07-28, everything 2025-11-25", got)
	}
	if out, err := h.call(t.Context(), "mcp__everything__echo", `{"message":"hi"}`); err != nil || out != "Echo: hi" {
		t.Errorf("everything echo = %q, %v", out, err)
	}
	if out, err := h.askCall("mcp__asker__signup", nil); err != nil || out != "decline map[]" {
		t.Errorf("asker signup = %q, %v", out, err)
	}
}
