package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
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

// TestMCPSchemaOverTheConversionBudget: an MCP server lists a tool whose
// 2 KB schema inlines to 8^7 copies of its last definition. find_tools in
// the gemini and openai-strict views gives its own schema with the
// budget named (not_in_format), the strict view of a call's arguments
// leaves them to the full schema, the call runs, and the tools array in
// each converted format leaves the tool out with the same reason.
func TestMCPSchemaOverTheConversionBudget(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf("[[mcp.servers]]\nname = \"chain\"\ncommand = [%q]\nenv = { %s = %q }\n",
		exe, mcptest.Env, mcptest.ModeRefChain))
	ws := exampleWorkspace(t)
	find := `{"role":"assistant","tool_calls":[{"id":"f1","type":"function","function":{"name":"find_tools","arguments":{"query":"select:mcp__chain__nested"}}}]}`
	call := func(id, args string) string {
		return `{"role":"assistant","tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"run_tool","arguments":{"name":"mcp__chain__nested","arguments":` + strconv.Quote(args) + `}}}]}`
	}
	input := `{"run":"g","tools_format":"gemini","message":` + find + "}\n" +
		`{"run":"s","tools_format":"openai-strict","message":` + find + "}\n" +
		`{"run":"s","tools_format":"openai-strict","message":` + call("r1", `{"root":null}`) + "}\n" +
		`{"run":"s","tools_format":"openai-strict","message":` + call("r2", `{}`) + "}\n"
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(), "--config", cfg, "--approve", "all", "--events=false", "-")
	if code != exitOK {
		t.Fatalf("run: exit status %d; stderr:\n%s", code, stderr.String())
	}
	want := []string{"f1:find_tools:ok", "f1:find_tools:ok", "r1:mcp__chain__nested:invalid_args", "r2:mcp__chain__nested:ok"}
	if diff := cmp.Diff(want, out.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
		for _, r := range out.results {
			t.Logf("%.300s", r.Content)
		}
	}
	for i, f := range []string{"gemini", "openai-strict"} {
		if i >= len(out.results) {
			break
		}
		var found struct {
			Tools []struct {
				Name        string          `json:"name"`
				Parameters  json.RawMessage `json:"parameters"`
				NotInFormat string          `json:"not_in_format"`
			} `json:"tools"`
		}
		c := out.results[i].Content
		if err := json.Unmarshal([]byte(c), &found); err != nil || len(found.Tools) != 1 {
			t.Fatalf("find_tools in %s: %v\n%.600s", f, err, c)
		}
		got := found.Tools[0]
		if !strings.Contains(got.NotInFormat, "budget") || !strings.Contains(string(got.Parameters), `"$defs"`) || len(c) > 8<<10 {
			t.Errorf("find_tools in %s: %d bytes, not_in_format %q; want the tool's own schema and the budget named", f, len(c), got.NotInFormat)
		}
	}
	for _, f := range []string{"gemini", "openai-strict", "responses", "anthropic"} {
		e, stdout, stderr = testEnv(nil)
		if code := e.main([]string{"tools", "--format", f, "--provider", "all", "--workspace", ws, "--config", cfg}); code != exitOK {
			t.Fatalf("tools --format %s: exit status %d; stderr:\n%s", f, code, stderr.String())
		}
		var listed struct {
			Refused []struct {
				Name   string `json:"name"`
				Reason string `json:"reason"`
			} `json:"refused"`
		}
		if err := json.Unmarshal([]byte(stdout.String()), &listed); err != nil {
			t.Fatalf("tools --format %s: %v\n%.500s", f, err, stdout.String())
		}
		refused := false
		for _, r := range listed.Refused {
			refused = refused || r.Name == "mcp__chain__nested" && strings.Contains(r.Reason, "budget")
		}
		if !refused || !strings.Contains(stdout.String(), "mcp__chain__echo") || len(stdout.String()) > 64<<10 {
			t.Errorf("tools --format %s (%d bytes): refused %+v; want mcp__chain__nested refused for the budget, echo listed", f, len(stdout.String()), listed.Refused)
		}
	}
}
