package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// patternTurnInput is one turn of run input: a client tool whose items
// must match a pattern that backtracks exponentially on every item given,
// called once per entry of calls with that many distinct items.
func patternTurnInput(t *testing.T, calls ...int) string {
	t.Helper()
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type toolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	var tcs []toolCall
	for i, n := range calls {
		items := make([]string, n)
		for j := range items {
			items[j] = strings.Repeat("a", 40) + "!" + strconv.Itoa(j)
		}
		args, err := json.Marshal(map[string]any{"items": items})
		if err != nil {
			t.Fatal(err)
		}
		tcs = append(tcs, toolCall{ID: "g" + strconv.Itoa(i+1), Type: "function", Function: fn{Name: "grep", Arguments: string(args)}})
	}
	msg, err := json.Marshal(map[string]any{"role": "assistant", "tool_calls": tcs})
	if err != nil {
		t.Fatal(err)
	}
	return `{"client_tools":[{"type":"function","function":{"name":"grep","parameters":{"type":"object",` +
		`"properties":{"items":{"type":"array","items":{"type":"string","pattern":"^(a+)+$"}}}}}}],"message":` + string(msg) + "}\n"
}

// runPatternTurn runs one turn of input under the configuration text and
// returns the contents of its results.
func runPatternTurn(t *testing.T, config, input string) (statuses, contents []string) {
	t.Helper()
	ws := exampleWorkspace(t)
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(), "--events=false", "--config", cfg)
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	for _, r := range out.results {
		contents = append(contents, r.Content)
	}
	return out.statuses(), contents
}

// TestRunPatternCallBudget: [dispatcher] pattern_call_budget stops the
// matching of one call; the refusal names the configured budget.
func TestRunPatternCallBudget(t *testing.T) {
	st, contents := runPatternTurn(t, "[dispatcher]\npattern_timeout = \"5ms\"\npattern_call_budget = \"20ms\"\n", patternTurnInput(t, 400))
	if diff := cmp.Diff([]string{"g1:grep:invalid_args"}, st); diff != "" {
		t.Fatalf("statuses (-want +got):\n%s", diff)
	}
	if !strings.Contains(contents[0], "used this call's whole budget (20ms") {
		t.Errorf("content %.300q does not name the configured budget", contents[0])
	}
}

// TestRunPatternTurnBudget: [dispatcher] pattern_turn_budget is shared by
// the calls of one turn: the first spends it, the second is refused
// without a match.
func TestRunPatternTurnBudget(t *testing.T) {
	st, contents := runPatternTurn(t, "[dispatcher]\npattern_timeout = \"5ms\"\npattern_turn_budget = \"20ms\"\n", patternTurnInput(t, 400, 2))
	if diff := cmp.Diff([]string{"g1:grep:invalid_args", "g2:grep:invalid_args"}, st); diff != "" {
		t.Fatalf("statuses (-want +got):\n%s", diff)
	}
	for i, c := range contents {
		if !strings.Contains(c, "this turn's budget for matching schema patterns (20ms) is spent") {
			t.Errorf("call %d: content %.300q does not name the configured budget", i+1, c)
		}
	}
	if strings.Contains(contents[1], "could not be checked") {
		t.Errorf("call 2: %.300q; nothing should have been matched after the budget was spent", contents[1])
	}
}
