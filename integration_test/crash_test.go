package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// crashTurn is one turn of the crash scenario: calls of run_command that
// append their own name to ran.log and then sleep.
func crashTurn(turnID string, calls ...string) string {
	var tcs []map[string]any
	for _, c := range calls {
		args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", "echo " + c + " >> ran.log; sleep 1"}})
		tcs = append(tcs, map[string]any{"id": c, "type": "function", "function": map[string]any{"name": "run_command", "arguments": string(args)}})
	}
	b, _ := json.Marshal(map[string]any{
		"session": "crash", "run": "r1", "provider": "claude-code", "auto_load_schemas": true, "turn_id": turnID,
		"message": map[string]any{"role": "assistant", "tool_calls": tcs},
	})
	return string(b)
}

type sessionDump struct {
	Tools []struct {
		ToolCallID string `json:"tool_call_id"`
		Status     string `json:"status"`
	} `json:"tools"`
	ToolHistories []json.RawMessage `json:"tool_histories"`
}

// TestCrashMidTurn SIGKILLs `tooldispatch run` while the second turn's first
// call runs, then shows on the same --data: the committed turn intact, the
// interrupted call outcome_unknown, the calls that had not started canceled,
// and a rerun of the same input (turn ids make turns idempotent) running
// only the third turn — nothing runs twice.
func TestCrashMidTurn(t *testing.T) {
	ws, data := t.TempDir(), t.TempDir()
	input := filepath.Join(t.TempDir(), "turns.jsonl")
	turns := strings.Join([]string{
		crashTurn("t1", "t1c1"),
		crashTurn("t2", "t2c1", "t2c2", "t2c3"),
		crashTurn("t3", "t3c1"),
	}, "\n") + "\n"
	if err := os.WriteFile(input, []byte(turns), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--workspace", ws, "--data", data, "--approve", "all", "--shell", input}
	cmd := exec.Command(binary, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ranLog := filepath.Join(ws, "ran.log")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(readFile(ranLog), "t2c1") {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("second turn never started; output:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	got := statusesOnDisk(t, ws, data)
	want := map[string]string{"t1c1": "ok", "t2c1": "outcome_unknown", "t2c2": "canceled", "t2c3": "canceled"}
	for id, st := range want {
		if got[id] != st {
			t.Errorf("after the kill, %s = %q, want %q (all: %v)", id, got[id], st, got)
		}
	}
	if _, ok := got["t3c1"]; ok {
		t.Errorf("third turn recorded before it ran: %v", got)
	}

	rerun := exec.Command(binary, args...)
	rerunOut, err := rerun.CombinedOutput()
	if err != nil {
		t.Fatalf("rerun: %v\n%s", err, rerunOut)
	}
	got = statusesOnDisk(t, ws, data)
	want["t3c1"] = "ok"
	for id, st := range want {
		if got[id] != st {
			t.Errorf("after the rerun, %s = %q, want %q", id, got[id], st)
		}
	}
	ran := strings.Fields(readFile(ranLog))
	if strings.Join(ran, " ") != "t1c1 t2c1 t3c1" {
		t.Errorf("executions = %v, want each of t1c1 t2c1 t3c1 exactly once", ran)
	}
	// The rerun printed every call's result, replayed ones included.
	results := 0
	sc := bufio.NewScanner(bytes.NewReader(rerunOut))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), `{"role":"tool"`) {
			results++
		}
	}
	if results != 5 {
		t.Errorf("rerun printed %d results, want 5:\n%s", results, rerunOut)
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// statusesOnDisk reads the persisted session with `tooldispatch session`.
func statusesOnDisk(t *testing.T, ws, data string) map[string]string {
	t.Helper()
	out, err := exec.Command(binary, "session", "--workspace", ws, "--data", data, "--session", "crash").Output()
	if err != nil {
		t.Fatalf("session: %v", err)
	}
	var d sessionDump
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("session output: %v\n%s", err, out)
	}
	m := map[string]string{}
	for _, tm := range d.Tools {
		if _, dup := m[tm.ToolCallID]; dup {
			t.Errorf("call %s has two results", tm.ToolCallID)
		}
		m[tm.ToolCallID] = tm.Status
	}
	return m
}
