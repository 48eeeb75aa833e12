package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
)

// TestChaosPlanMatchesRunAndReport runs the example turns under the example
// chaos policy with the built binary: every fault the report finds in the
// persisted session was in the plan printed before the run, and every
// injected message is marked.
func TestChaosPlanMatchesRunAndReport(t *testing.T) {
	bin := binary(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ws := exampleWorkspace(t)
	data := t.TempDir()
	policy := filepath.Join(root, "examples", "chaos.toml")
	turns := filepath.Join(root, "examples", "turns.jsonl")
	plan, err := exec.Command(bin, "chaos", "plan", "--chaos", policy, "--run", "demo", turns).Output()
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	planned := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(plan)), "\n") {
		var p chaos.PlannedFault
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatalf("plan line %q: %v", line, err)
		}
		planned[p.CallID] = p.Fault
	}
	if len(planned) == 0 {
		t.Fatal("the example policy plans no fault on the example turns")
	}
	run := exec.Command(bin, "run", "--workspace", ws, "--data", data, "--approve", "none", "--run", "demo",
		"--session", "chaos", "--events=false", "--chaos", policy, turns)
	out, err := run.Output()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	injected := 0
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var m struct {
			ID       string `json:"tool_call_id"`
			Injected string `json:"injected"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		if m.Injected != "" {
			injected++
			if planned[m.ID] != m.Injected {
				t.Errorf("call %s got %q, the plan said %q", m.ID, m.Injected, planned[m.ID])
			}
		}
	}
	report, err := exec.Command(bin, "chaos", "report", "--workspace", ws, "--data", data, "--session", "chaos", "--json").Output()
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	rows := strings.Split(strings.TrimSpace(string(report)), "\n")
	if injected == 0 || len(rows) != injected {
		t.Fatalf("report has %d rows for %d injected results:\n%s", len(rows), injected, report)
	}
	for _, line := range rows {
		var r chaos.ReportedFault
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if planned[r.CallID] != r.Fault || r.Next == "" {
			t.Errorf("report row %+v does not match the plan (%q)", r, planned[r.CallID])
		}
	}
}
