package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// editLatency is a chaos policy that holds every edit_file call for d
// before it runs: the call's intent is durable, its commit not yet made.
func editLatency(t *testing.T, d time.Duration) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "chaos.toml")
	text := "[chaos]\nseed = 1\n\n[[chaos.rules]]\ntools = [\"edit_file\"]\nfaults = [{ kind = \"latency\", probability = 1.0, min = \"" +
		d.String() + "\", max = \"" + d.String() + "\" }]\n"
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// editCall is a one-call turn's edit_file call replacing old with new in notes.txt.
func editCall() map[string]any {
	args, _ := json.Marshal(map[string]any{"path": "notes.txt", "old_string": "old", "new_string": "new"})
	return map[string]any{"id": "e1", "type": "function", "function": map[string]any{"name": "edit_file", "arguments": string(args)}}
}

// TestKillBetweenIntentAndCommitBadger SIGKILLs `tooldispatch run` once a
// one-call edit_file turn's intent is durable (its tool_call_start event
// is emitted after the intent is written) and before its commit (the call
// is held by a chaos latency), and reads the call outcome_unknown from
// the Badger data directory: never a result that was not committed, never
// a call silently forgotten.
func TestKillBetweenIntentAndCommitBadger(t *testing.T) {
	ws, data := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	turn, _ := json.Marshal(map[string]any{"session": "crash", "run": "r1", "provider": "claude-code", "auto_load_schemas": true,
		"turn_id": "edit", "message": map[string]any{"role": "assistant", "tool_calls": []any{editCall()}}})
	cmd := exec.Command(binary, "run", "--workspace", ws, "--data", data, "--approve", "all",
		"--config", editLatency(t, time.Minute), "-")
	cmd.Stdin = strings.NewReader(string(turn) + "\n")
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
	started := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev struct {
				Event  string `json:"event"`
				CallID string `json:"call_id"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == "tool_call_start" && ev.CallID == "e1" {
				started <- true
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
		close(started)
	}()
	select {
	case ok := <-started:
		if !ok {
			t.Fatalf("run ended before the call started:\n%s", stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the call never started:\n%s", stderr)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	if got := statusesOnDisk(t, ws, data); got["e1"] != "outcome_unknown" || len(got) != 1 {
		t.Errorf("after the kill between intent and commit: %v, want e1 outcome_unknown", got)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.txt")); string(b) != "old\n" {
		t.Errorf("notes.txt = %q: the held call ran", b)
	}
}

// TestKillBetweenIntentAndCommitPostgres runs a one-call edit_file turn on
// a cluster member over PostgreSQL, holds the session's row once the
// turn's intent is in the intents table (the commit locks that row, so it
// waits), lets the edit run (the file changes), SIGKILLs the member, and
// reads the call outcome_unknown from a new member: the edit happened, its
// result was never committed, and the call says so.
func TestKillBetweenIntentAndCommitPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	pg := pgServer(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := editLatency(t, 2*time.Second)
	ms, _ := startClusterWith(t, 1, ws, clusterSetup{pg: pg, config: conf})
	h := newHistory(t, ms[0].logs)
	ctx := context.Background()
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)

	go func() { _, _ = h.postTurn(ctx, ms[0].http, "crash", "edit", editCall()) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM intents WHERE session = $1`, []byte("crash")).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no intent was written:\n%s", ms[0].log)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The call is held for 2 s by the chaos latency: time enough to take
	// the session's row before its commit does.
	lock, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `SELECT next_turn FROM sessions WHERE session = $1 FOR UPDATE`, []byte("crash")); err != nil {
		t.Fatal(err)
	}
	for {
		if b, _ := os.ReadFile(filepath.Join(ws, "notes.txt")); string(b) == "new\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the edit never ran:\n%s", ms[0].log)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var turns int
	if err := lock.QueryRow(ctx, `SELECT count(*) FROM turns WHERE session = $1`, []byte("crash")).Scan(&turns); err != nil || turns != 0 {
		t.Fatalf("the turn committed before the kill (%d turns, %v)", turns, err)
	}
	if err := ms[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = ms[0].cmd.Wait()
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// The session's next writer (its grain, activated by the turn sent
	// again with its turn id) resolves the intent: the turn replays as
	// outcome_unknown, and the edit does not run again.
	next, _ := startClusterWith(t, 1, ws, clusterSetup{pg: pg, config: conf})
	again, err := h.postTurn(ctx, next[0].http, "crash", "edit", editCall())
	if err != nil || len(again.Messages) != 1 || again.Messages[0].Status != "outcome_unknown" {
		t.Errorf("replay of the interrupted turn: %+v %v", again, err)
	}
	if got := storedStatuses(t, next[0].http, "crash"); got["e1"] != "outcome_unknown" || len(got) != 1 {
		t.Errorf("after the kill between intent and commit: %v, want e1 outcome_unknown", got)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.txt")); string(b) != "new\n" {
		t.Errorf("notes.txt = %q after the replay, want the one edit", b)
	}
	h.check(next, http.DefaultClient)
}
