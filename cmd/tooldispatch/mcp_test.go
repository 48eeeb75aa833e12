package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/toolkit/mcp/mcptest"
)

// TestFailedMCPServerLeavesTheRestServing: the configured MCP server lists
// tool pages without end. It is marked failed at start-up; run dispatches
// the turn with the built-in tools (exit 0), and tools --all names the
// server as failed, with the reason, and none of its tools.
func TestFailedMCPServerLeavesTheRestServing(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf("[[mcp.servers]]\nname = \"endless\"\ncommand = [%q]\nenv = { %s = %q }\n",
		exe, mcptest.Env, mcptest.ModeEndlessPages))
	ws := exampleWorkspace(t)

	input := `{"auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[` +
		`{"id":"r1","type":"function","function":{"name":"read_files","arguments":{"paths":["notes.md"]}}}]}}`
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(), "--config", cfg,
		"--provider", "claude-code", "--events=false", "-")
	if code != exitOK {
		t.Fatalf("run: exit status %d; stderr:\n%s", code, stderr.String())
	}
	if diff := cmp.Diff([]string{"r1:read_files:ok"}, out.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if !strings.Contains(stderr.String(), "MCP server failed") || !strings.Contains(stderr.String(), "more than 100 pages") {
		t.Errorf("the log does not say why the MCP server failed:\n%s", stderr.String())
	}

	e, stdout, stderr = testEnv(nil)
	if code := e.main([]string{"tools", "--all", "--workspace", ws, "--config", cfg}); code != exitOK {
		t.Fatalf("tools --all: exit status %d; stderr:\n%s", code, stderr.String())
	}
	var got struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		MCPServers []map[string]any `json:"mcp_servers"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &got); err != nil {
		t.Fatalf("tools --all output: %v\n%.500s", err, stdout.String())
	}
	for _, tool := range got.Tools {
		if strings.HasPrefix(tool.Name, "mcp__") {
			t.Errorf("a tool of the failed server is listed: %s", tool.Name)
		}
	}
	if len(got.MCPServers) != 1 {
		t.Fatalf("mcp_servers = %v; want the one server", got.MCPServers)
	}
	srv := got.MCPServers[0]
	errText, _ := srv["error"].(string)
	if srv["name"] != "endless" || srv["state"] != "failed" || srv["tools"] != 0.0 || !strings.Contains(errText, "more than 100 pages") {
		t.Errorf("mcp_servers[0] = %v; want endless, failed, no tools, with the page bound as the error", srv)
	}
	if _, retried := srv["next_attempt"]; retried {
		t.Errorf("mcp_servers[0] = %v; a server over a bound is not retried", srv)
	}
}
