package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit/mcp/mcptest"
)

// taskConfig is a configuration of server-everything alone, with extra
// settings of its server table.
func taskConfig(t *testing.T, extra string) string {
	t.Helper()
	argv := mcptest.Command(t, "server-everything", "stdio")
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = fmt.Sprintf("%q", a)
	}
	return writeConfig(t, fmt.Sprintf("[[mcp.servers]]\nname = \"everything\"\ncommand = [%s]\n%s", strings.Join(q, ", "), extra))
}

// TestMCPTaskRequiredToolRuns: server-everything's simulate-research-query
// declares execution.taskSupport "required" (called plainly it answers
// "requires task augmentation"). Through a whole run turn it is called as
// a task, followed with tasks/get (each new status a tool_call_text line
// of the call) and its result fetched with tasks/result.
func TestMCPTaskRequiredToolRuns(t *testing.T) {
	ws := t.TempDir()
	cfg := taskConfig(t, "")
	input := npmTurn("rq", "mcp__everything__simulate-research-query", map[string]any{"topic": "tides"})
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(), "--config", cfg,
		"--provider", "claude-code", "--approve", "all", "-")
	if code != exitOK {
		t.Fatalf("run: exit status %d; stderr:\n%s", code, stderr.String())
	}
	if len(out.results) != 1 || out.results[0].Status != "ok" || !strings.Contains(out.results[0].Content, "# Research Report: tides") {
		t.Fatalf("results = %+v; want the research report", out.results)
	}
	var texts []string
	for _, ev := range out.events {
		if ev.CallID == "rq" && ev.Event == "tool_call_text" {
			texts = append(texts, ev.Text)
		}
	}
	joined := strings.Join(texts, "")
	for _, want := range []string{"task working", "Gathering sources", "task completed"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the task's statuses streamed lack %q: %q", want, texts)
		}
	}
	t.Logf("%d task status lines: %q", len(texts), texts)
}

// TestMCPTaskCancelledAtTimeout: a task that outlives the tool's timeout
// (research of four 1 s stages, a 2 s timeout) is cancelled with
// tasks/cancel, and the server says it is cancelled.
func TestMCPTaskCancelledAtTimeout(t *testing.T) {
	ws := t.TempDir()
	cfg := taskConfig(t, "timeout = \"2s\"\n")
	input := npmTurn("rq", "mcp__everything__simulate-research-query", map[string]any{"topic": "tides"})
	out := runTurns(t, input, "--workspace", ws, "--data", filepath.Join(t.TempDir(), "data"), "--config", cfg,
		"--provider", "claude-code", "--approve", "all")
	if len(out.results) != 1 {
		t.Fatalf("results = %+v", out.results)
	}
	m := out.results[0]
	if m.Status != "timeout" || !strings.Contains(m.Content, "was cancelled (tasks/cancel: its status is now cancelled)") {
		t.Errorf("result = %s %q; want timeout, the task cancelled", m.Status, m.Content)
	}
}
