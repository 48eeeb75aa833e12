package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp/mcptest"
)

// taskJobsConfig is a configuration with one MCP server, "jobs": this
// test binary as mcptest's file-task server, keeping its tasks in file.
func taskJobsConfig(t *testing.T, file string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tooldispatch.toml")
	text := fmt.Sprintf("[[mcp.servers]]\nname = \"jobs\"\ncommand = [%q]\nenv = { %s = %q, %s = %q }\n",
		exe, mcptest.Env, mcptest.ModeFileTasks, mcptest.TaskFileEnv, file)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// jobTurn is a one-call turn of session "crash" calling the jobs server's
// job tool as call j1 with args.
func jobTurn(args map[string]any) string {
	a, _ := json.Marshal(args)
	turn, _ := json.Marshal(map[string]any{"session": "crash", "run": "r1", "provider": "claude-code", "auto_load_schemas": true,
		"turn_id": "job", "message": map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "j1", "type": "function",
			"function": map[string]any{"name": "mcp__jobs__job", "arguments": string(a)}}}}})
	return string(turn) + "\n"
}

// startJobRun starts `tooldispatch run` on data with the job turn, and
// returns it with a channel that gets each event of call j1 as run prints
// it ("kind text"), closed when run's output ends.
func startJobRun(t *testing.T, ws, data, config string, args map[string]any) (*exec.Cmd, <-chan string, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(binary, "run", "--workspace", ws, "--data", data, "--approve", "all", "--config", config, "-")
	cmd.Stdin = strings.NewReader(jobTurn(args))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	events := make(chan string, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev struct {
				Event  string `json:"event"`
				CallID string `json:"call_id"`
				Text   string `json:"text"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.CallID == "j1" {
				select {
				case events <- ev.Event + " " + ev.Text:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	return cmd, events, stderr
}

// killDuringTask runs the job turn until its call streams the task's
// first status (the task's id is durable in the intent by then, Call.NoteTask),
// SIGKILLs run, and returns the task's id as the server keeps it.
func killDuringTask(t *testing.T, ws, data, config, file string) string {
	t.Helper()
	cmd, events, stderr := startJobRun(t, ws, data, config, map[string]any{"text": "report: tides"})
	deadline := time.After(60 * time.Second)
	for seen := false; !seen; {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("run ended before the task was followed:\n%s", stderr)
			}
			seen = strings.HasPrefix(ev, "tool_call_text task working")
		case <-deadline:
			t.Fatalf("the call never streamed its task's status:\n%s", stderr)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	f, err := mcptest.ReadTaskFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tasks) != 1 || f.Tasks["job-1"] == nil || f.Tasks["job-1"].Status != "working" {
		t.Fatalf("the server's tasks after the kill: %+v; want job-1 working", f.Tasks)
	}
	return "job-1"
}

// restartRun starts run again on data with nothing to dispatch: it
// resolves what the kill left, and exits.
func restartRun(t *testing.T, ws, data, config string) string {
	t.Helper()
	cmd := exec.Command(binary, "run", "--workspace", ws, "--data", data, "--config", config, "-")
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run after the kill: %v\n%s", err, out)
	}
	return string(out)
}

// callOnDisk is the persisted message of call id in session "crash".
func callOnDisk(t *testing.T, ws, data, id string) (status, content string) {
	t.Helper()
	out, err := exec.Command(binary, "session", "--workspace", ws, "--data", data, "--session", "crash").Output()
	if err != nil {
		t.Fatalf("session: %v", err)
	}
	var d struct {
		Tools []struct {
			ToolCallID string `json:"tool_call_id"`
			Status     string `json:"status"`
			Content    string `json:"content"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("session output: %v\n%s", err, out)
	}
	n := 0
	for _, m := range d.Tools {
		if m.ToolCallID == id {
			status, content = m.Status, m.Content
			n++
		}
	}
	if n != 1 {
		t.Fatalf("call %s has %d results in the session, want 1:\n%s", id, n, out)
	}
	return status, content
}

// TestKillDuringMCPTaskBadger SIGKILLs `tooldispatch run` while a call
// runs as an MCP task (the file-task server keeps it working), decides
// the task's fate on the server meanwhile (as if it ran on), and starts
// run again on the same Badger data folder: the call reads the task's
// real outcome, asked with tasks/get and tasks/result once the server is
// up. Only a task the server no longer knows reads outcome_unknown.
func TestKillDuringMCPTaskBadger(t *testing.T) {
	cases := []struct {
		name        string
		fate        func(*mcptest.FileTask) // nil: the server forgot the task
		status      string
		content     []string
		serverAfter string // the task's status on the server afterwards
	}{
		{"completed", func(j *mcptest.FileTask) { j.Status = "completed" }, "ok", []string{"report: tides"}, "completed"},
		{"failed", func(j *mcptest.FileTask) { j.Status, j.Text = "failed", "the job broke: disk full" }, "error",
			[]string{"the job broke: disk full", "\nnext: "}, "failed"},
		{"cancelled", func(j *mcptest.FileTask) { j.Status, j.Message = "cancelled", "stopped by an operator" }, "canceled",
			[]string{"stopped by an operator"}, "cancelled"},
		{"still_working_then_completed", func(j *mcptest.FileTask) { j.After, j.Then = 2, "completed" }, "ok",
			[]string{"report: tides"}, "completed"},
		{"unknown_to_the_server", nil, "outcome_unknown", []string{"no longer knows task \"job-1\""}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws, data := t.TempDir(), t.TempDir()
			file := filepath.Join(t.TempDir(), "tasks.json")
			config := taskJobsConfig(t, file)
			id := killDuringTask(t, ws, data, config, file)
			err := mcptest.EditTaskFile(file, func(f *mcptest.TaskFile) {
				if tc.fate == nil {
					delete(f.Tasks, id)
					return
				}
				tc.fate(f.Tasks[id])
			})
			if err != nil {
				t.Fatal(err)
			}
			logs := restartRun(t, ws, data, config)
			status, content := callOnDisk(t, ws, data, "j1")
			if status != tc.status {
				t.Errorf("after the restart call j1 reads %s %q, want %s\nrun's log:\n%s", status, content, tc.status, logs)
			}
			for _, want := range tc.content {
				if !strings.Contains(content, want) {
					t.Errorf("call j1's content %q lacks %q", content, want)
				}
			}
			if f, err := mcptest.ReadTaskFile(file); err != nil {
				t.Fatal(err)
			} else if tc.serverAfter != "" && (f.Tasks[id] == nil || f.Tasks[id].Status != tc.serverAfter) {
				t.Errorf("task %s on the server: %+v, want %s", id, f.Tasks[id], tc.serverAfter)
			}
			t.Logf("%s: j1 %s %q", tc.name, status, content)
		})
	}
}

// TestKillBeforeTheTaskIDIsWritten SIGKILLs `tooldispatch run` after the
// server made the call's task but before the dispatcher learned its id
// (the server holds its answer until the test lets it go): the intent
// names no task, so after the restart the call reads outcome_unknown, never
// run again, while the task lives on on the server (it may still take
// effect; the content says to check).
func TestKillBeforeTheTaskIDIsWritten(t *testing.T) {
	ws, data := t.TempDir(), t.TempDir()
	dir := t.TempDir()
	file, gate := filepath.Join(dir, "tasks.json"), filepath.Join(dir, "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	config := taskJobsConfig(t, file)
	cmd, _, stderr := startJobRun(t, ws, data, config, map[string]any{"text": "report", "gate": gate})
	// Opening the FIFO to write waits for the server to open it to read,
	// which it does once the task is in its file, before it answers.
	opened := make(chan *os.File, 1)
	go func() {
		w, err := os.OpenFile(gate, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
		}
		opened <- w
	}()
	var w *os.File
	select {
	case w = <-opened:
	case <-time.After(60 * time.Second):
		t.Fatalf("the server never made the task:\n%s", stderr)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if w != nil {
		w.Close() // the orphaned server answers no one, and ends
	}
	restartRun(t, ws, data, config)
	status, content := callOnDisk(t, ws, data, "j1")
	if status != "outcome_unknown" || strings.Contains(content, "job-1") {
		t.Errorf("call j1 = %s %q; want outcome_unknown, no task named (its id was never written)", status, content)
	}
	f, err := mcptest.ReadTaskFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tasks) != 1 || f.Tasks["job-1"] == nil || f.Tasks["job-1"].Status != "working" || f.Tasks["job-1"].Polls != 0 {
		t.Errorf("the server's tasks: %+v; want job-1 made, never asked about, still working", f.Tasks)
	}
}

// jobCall is the job turn's call j1 (for a cluster member's HTTP API).
func jobCall(args map[string]any) map[string]any {
	a, _ := json.Marshal(args)
	return map[string]any{"id": "j1", "type": "function", "function": map[string]any{"name": "mcp__jobs__job", "arguments": string(a)}}
}

// TestKillDuringMCPTaskPostgres SIGKILLs a cluster member while a call of
// its session runs as an MCP task, once the turn's intent in PostgreSQL
// names the task, lets the task complete on the server (its tasks are in
// a file, so the next member's server knows them), and sends the turn
// again with its turn id to a new member: the session's new grain
// resolves the intent at activation with tasks/get and tasks/result, and
// the turn replays the task's real result.
func TestKillDuringMCPTaskPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	pg := pgServer(t)
	ws := t.TempDir()
	file := filepath.Join(t.TempDir(), "tasks.json")
	config := taskJobsConfig(t, file)
	ms, _ := startClusterWith(t, 1, ws, clusterSetup{pg: pg, config: config})
	ctx := context.Background()
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	go func() {
		_, _ = postTurn(ctx, ms[0].http, "crash", "job", jobCall(map[string]any{"text": "report: tides"}))
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var raw []byte
		err := db.QueryRow(ctx, `SELECT record FROM intents WHERE session = $1`, []byte("crash")).Scan(&raw)
		if err == nil {
			in, err := cachestore.DecodeIntent(raw)
			if err != nil {
				t.Fatal(err)
			}
			if len(in.Tasks) == 1 && in.Tasks[0].ID == "job-1" {
				break
			}
		} else if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the intent never named the task:\n%s", ms[0].log)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := ms[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = ms[0].cmd.Wait()
	if err := mcptest.EditTaskFile(file, func(f *mcptest.TaskFile) { f.Tasks["job-1"].Status = "completed" }); err != nil {
		t.Fatal(err)
	}

	next, _ := startClusterWith(t, 1, ws, clusterSetup{pg: pg, config: config})
	again, err := postTurn(ctx, next[0].http, "crash", "job", jobCall(map[string]any{"text": "report: tides"}))
	if err != nil || len(again.Messages) != 1 || again.Messages[0].Status != "ok" || again.Messages[0].Content != "report: tides" {
		t.Errorf("replay of the interrupted turn: %+v %v; want j1 ok with the task's result\n%s", again, err, next[0].log)
	}
	if f, err := mcptest.ReadTaskFile(file); err != nil || len(f.Tasks) != 1 {
		t.Errorf("the server's tasks: %+v, %v; want job-1 alone (the call did not run again)", f, err)
	}
}
