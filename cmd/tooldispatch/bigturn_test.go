package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/integration_test/chaos"
)

// bigTurnInput is one envelope (schemas auto-loaded) whose message holds
// the calls made by call(i).
func bigTurnInput(t *testing.T, n int, call func(i int) (name string, args any)) string {
	t.Helper()
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type tc struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	calls := make([]tc, n)
	for i := range calls {
		name, args := call(i)
		raw, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		calls[i] = tc{ID: fmt.Sprintf("c%d", i), Type: "function", Function: fn{Name: name, Arguments: string(raw)}}
	}
	b, err := json.Marshal(map[string]any{
		"auto_load_schemas": true,
		"message":           map[string]any{"role": "assistant", "tool_calls": calls},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sessionDump runs "tooldispatch session" on data.
func sessionDump(t *testing.T, data string) sessionOutput {
	t.Helper()
	e, stdout, stderr := testEnv(strings.NewReader(""))
	if code := e.main([]string{"session", "--data", data}); code != exitOK {
		t.Fatalf("session: exit status %d; stderr:\n%s", code, stderr.String())
	}
	var out sessionOutput
	if err := json.Unmarshal([]byte(stdout.String()), &out); err != nil {
		t.Fatalf("session output: %v", err)
	}
	return out
}

// TestRunBigTurnsCommit: turns at the documented limits (4096 calls; 20
// calls with 900 KB of arguments each) commit, every call reads ok, and the
// session read back holds exactly what run printed.
func TestRunBigTurnsCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("big turns")
	}
	content := func(i int) string { return strings.Repeat(string(rune('a'+i%26)), 900<<10) }
	tests := []struct {
		name string
		n    int
		call func(i int) (string, any)
	}{
		{"4096_calculate_calls", 4096, func(i int) (string, any) {
			return "calculate", map[string]string{"expression": fmt.Sprintf("%d+1", i)}
		}},
		{"20_edit_file_calls_of_900KB", 20, func(i int) (string, any) {
			return "edit_file", map[string]string{"path": fmt.Sprintf("big/f%02d.txt", i), "content": content(i)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, data := exampleWorkspace(t), t.TempDir()
			e, stdout, stderr := testEnv(strings.NewReader(bigTurnInput(t, tt.n, tt.call)))
			code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", data,
				"--provider", "claude-code", "--approve", "all", "--events=false", "-")
			if code != exitOK {
				t.Fatalf("exit status %d; stderr:\n%.2000s", code, stderr.String())
			}
			if len(out.results) != tt.n {
				t.Fatalf("%d results, want %d", len(out.results), tt.n)
			}
			for i, r := range out.results {
				if r.Status != "ok" || r.ToolCallID != fmt.Sprintf("c%d", i) {
					t.Fatalf("result %d = %s:%s %.200q, want ok", i, r.ToolCallID, r.Status, r.Content)
				}
			}
			dump := sessionDump(t, data)
			if diff := cmp.Diff(out.results, dump.Tools); diff != "" {
				t.Errorf("session differs from what run printed (-printed +stored):\n%.2000s", diff)
			}
			if len(dump.ToolHistories) != tt.n+1 {
				t.Errorf("%d tool_histories entries, want %d", len(dump.ToolHistories), tt.n+1)
			}
		})
	}
}

// TestRunStoreFailurePrintsNoResults: when the turn cannot be committed,
// run prints none of its results and exits 3; the session holds the turn
// as interrupted (outcome_unknown), not as the ok run would have printed.
func TestRunStoreFailurePrintsNoResults(t *testing.T) {
	ws, data := exampleWorkspace(t), t.TempDir()
	input := bigTurnInput(t, 3, func(i int) (string, any) {
		return "calculate", map[string]string{"expression": fmt.Sprintf("%d*2", i)}
	})
	e, stdout, stderr := testEnv(strings.NewReader(input))
	e.wrapStore = func(s cachestore.Store) cachestore.Store {
		f := chaos.NewFaultStore(s)
		f.FailCommits.Store(true)
		return f
	}
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", data, "--provider", "claude-code", "-")
	if code != exitFailure {
		t.Errorf("exit status %d, want %d; stderr:\n%s", code, exitFailure, stderr.String())
	}
	if len(out.results) != 0 {
		t.Errorf("run printed %d results of a turn that was not committed: %v", len(out.results), out.statuses())
	}
	for _, ev := range out.events {
		if ev.Event == "tool_result" {
			t.Errorf("run printed a tool_result event of a turn that was not committed: %+v", ev)
		}
	}
	if !strings.Contains(stderr.String(), "injected store write failure") {
		t.Errorf("stderr does not say what failed:\n%s", stderr.String())
	}
	for _, m := range sessionDump(t, data).Tools {
		if m.Status != cachestore.StatusOutcomeUnknown {
			t.Errorf("stored %s:%s, want outcome_unknown", m.ToolCallID, m.Status)
		}
	}
}

// TestRunRefusesAReusedTurnIDWithOtherCalls: run exits 1 when a turn_id is
// already committed with other calls, runs nothing of that turn and names
// the turn id; the same calls replay.
func TestRunRefusesAReusedTurnIDWithOtherCalls(t *testing.T) {
	ws, data := exampleWorkspace(t), t.TempDir()
	edit := func(content string) string {
		return `{"turn_id":"tid-1","auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[` +
			`{"id":"e1","type":"function","function":{"name":"edit_file","arguments":"{\"path\":\"out.txt\",\"content\":\"` + content + `\"}"}}]}}` + "\n"
	}
	args := []string{"--workspace", ws, "--data", data, "--provider", "claude-code", "--approve", "all", "--events=false", "-"}
	e, stdout, stderr := testEnv(strings.NewReader(edit("first")))
	if code, out := runInProcess(t, e, stdout, stderr, args...); code != exitOK || len(out.results) != 1 || out.results[0].Status != "ok" {
		t.Fatalf("first run: exit %d, %v; stderr:\n%s", code, out.statuses(), stderr.String())
	}

	e, stdout, stderr = testEnv(strings.NewReader(edit("first")))
	if code, out := runInProcess(t, e, stdout, stderr, args...); code != exitOK || len(out.results) != 1 || out.results[0].Status != "ok" {
		t.Errorf("same calls again: exit %d, %v, want the replayed ok; stderr:\n%s", code, out.statuses(), stderr.String())
	}

	e, stdout, stderr = testEnv(strings.NewReader(edit("second")))
	code, out := runInProcess(t, e, stdout, stderr, args...)
	if code != exitInput {
		t.Errorf("different calls under a committed turn_id: exit %d, want %d", code, exitInput)
	}
	if len(out.results) != 0 {
		t.Errorf("printed %v for the refused turn", out.statuses())
	}
	if !strings.Contains(stderr.String(), `"tid-1"`) {
		t.Errorf("stderr does not name the turn id:\n%s", stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(ws, "out.txt"))
	if err != nil || string(b) != "first" {
		t.Errorf("out.txt = %q, %v; the refused turn ran", b, err)
	}
	if n := len(sessionDump(t, data).Tools); n != 1 {
		t.Errorf("session holds %d tool messages, want 1", n)
	}
}
