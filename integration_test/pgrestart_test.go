package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore/postgres"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// TestPostgresRestartedMidRun dispatches turns over the PostgreSQL store,
// stops the database between turns and during one, and shows: a turn while
// it is down fails with an infrastructure error and leaves nothing
// half-written, and turns succeed again once it is back — the interrupted
// turn's calls read outcome_unknown or canceled, never half a turn.
func TestPostgresRestartedMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(matches) == 0 || os.Getenv("TOOLDISPATCH_PG_URL") == "skip" {
		t.Skip("PostgreSQL not installed: .ci/run installs the postgresql package")
	}
	out, err := exec.Command("../scripts/pg-test-server.sh", "start", "--watch", fmt.Sprint(os.Getpid())).Output()
	if err != nil {
		t.Fatalf("starting PostgreSQL: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	url, dir := lines[0], lines[1]
	t.Cleanup(func() { _ = exec.Command("../scripts/pg-test-server.sh", "stop", dir).Run() })
	pgctl := func(verb string) {
		t.Helper()
		if out, err := exec.Command("../scripts/pg-test-server.sh", verb, dir).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", verb, err, out)
		}
	}

	ctx := context.Background()
	store, err := postgres.Open(ctx, postgres.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	w, err := builtin.OpenWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	builtin.Register(reg, builtin.Deps{Workspace: w, Shell: true})
	d, err := actors.New(actors.Config{Registry: reg, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = d.Close(cctx)
		_ = store.Close()
	}()
	turn := func(id string, script string) (*messages.TurnResult, error) {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		return d.Dispatch(cctx, &messages.DispatchTurn{Session: "pg", Run: "r", Provider: "claude-code", Approve: "all",
			AutoLoadSchemas: true, TurnId: id, Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: []*messages.ToolCall{
				{Id: id + "c", Type: "function", Function: &messages.FunctionCall{Name: "run_command",
					Arguments: fmt.Sprintf(`{"argv":["sh","-c",%q]}`, script)}}}}})
	}
	if r, err := turn("a", "echo a >> ran.log"); err != nil || r.Messages[0].Status != "ok" {
		t.Fatalf("turn a: %v %v", r, err)
	}

	// Down between turns: the next turn fails cleanly, nothing runs.
	pgctl("down")
	if r, err := turn("b", "echo b >> ran.log"); err == nil {
		t.Fatalf("turn b succeeded with the database down: %v", r)
	} else {
		t.Logf("turn while down: %v", err)
	}
	pgctl("up")

	// Down during a turn: the call runs, its commit fails, the turn
	// reports an infrastructure error.
	done := make(chan error, 1)
	go func() {
		_, err := turn("c", "echo c >> ran.log; sleep 1")
		done <- err
	}()
	for !strings.Contains(readFile(filepath.Join(ws, "ran.log")), "c") {
		time.Sleep(10 * time.Millisecond)
	}
	pgctl("down")
	if err := <-done; err == nil {
		t.Fatal("turn c committed with the database down")
	}
	pgctl("up")

	// Back: turns work again.
	var r *messages.TurnResult
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err = turn("d", "echo d >> ran.log")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || r.Messages[0].Status != "ok" {
		t.Fatalf("turn d after the restart: %v %v", r, err)
	}
	turns, err := store.Turns(ctx, "pg")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tr := range turns {
		if len(tr.ToolMessages) != len(tr.Assistant.GetToolCalls()) {
			t.Errorf("turn %d half-written: %d messages for %d calls", tr.Turn, len(tr.ToolMessages), len(tr.Assistant.GetToolCalls()))
		}
		for _, m := range tr.ToolMessages {
			got[m.ToolCallId] = m.Status
		}
	}
	if got["ac"] != "ok" || got["dc"] != "ok" || got["cc"] != "outcome_unknown" {
		t.Errorf("persisted statuses %v: want ac ok, cc outcome_unknown (its intent resolved on reload), dc ok", got)
	}
	if _, ok := got["bc"]; ok && got["bc"] == "ok" {
		t.Errorf("turn b recorded as run: %v", got)
	}
	if ran := strings.Fields(readFile(filepath.Join(ws, "ran.log"))); strings.Join(ran, " ") != "a c d" {
		t.Errorf("executions %v, want a c d", ran)
	}
}
