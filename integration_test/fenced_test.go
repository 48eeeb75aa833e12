package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore/postgres"
)

// TestFencedTurnIsSentAgain: while a member's grain runs a turn, another
// writer takes the session over in the store (here the test itself loads
// the session, as a grain activated on another member does when members
// disagree on the placement: a rolling restart on a busy machine). The
// member's commit is refused (fenced), and its answer is a 503 with
// Retry-After telling the client to send the turn again with its turn_id,
// not a 500 a client gives up on (TestClusterRollingRestart under load:
// 'l10-t22: status 500 {"error":"the turn failed: committing the turn:
// committing turn 6 of session \"load-10\": held epoch 3, session epoch 4:
// cachestore: session taken over by another writer; …"}'). Sent again,
// the turn replays what the store holds (the interrupted call
// outcome_unknown), and the call ran once.
func TestFencedTurnIsSentAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster member")
	}
	pg := pgServer(t)
	ws := t.TempDir()
	ms, _ := startClusterWith(t, 1, ws, clusterSetup{pg: pg})
	h := newHistory(t, ms[0].logs)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	call := commandCall("f1", "echo f1 >> ran.log; while [ ! -e release ]; do sleep 0.05; done")
	type answer struct {
		status     int
		retryAfter string
		body       string
	}
	first := make(chan answer, 1)
	go func() {
		body, _ := json.Marshal(map[string]any{"run": "r", "provider": "claude-code", "auto_load_schemas": true, "approve": "all",
			"turn_id": "t1", "message": map[string]any{"role": "assistant", "tool_calls": []any{call}}})
		o := h.begin(0, "fenced", "t1", []string{"f1"})
		resp, err := http.Post(ms[0].http+"/v1/sessions/fenced/turns", "application/json", bytes.NewReader(body))
		if err != nil {
			o.end(0, nil, err)
			first <- answer{body: err.Error()}
			return
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		o.end(resp.StatusCode, data, err)
		first <- answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(data)}
	}()
	for !strings.Contains(readFile(filepath.Join(ws, "ran.log")), "f1") {
		if ctx.Err() != nil {
			t.Fatal("the call never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Another writer takes the session over while the call runs.
	st, err := postgres.Open(ctx, postgres.Options{URL: pg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.LoadSession(ctx, "fenced"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := os.WriteFile(filepath.Join(ws, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var a answer
	select {
	case a = <-first:
	case <-ctx.Done():
		t.Fatal("the fenced turn never answered")
	}
	if a.status != http.StatusServiceUnavailable || a.retryAfter == "" || !strings.Contains(a.body, "taken over") || !strings.Contains(a.body, "turn_id") {
		t.Errorf("the fenced turn: %d (Retry-After %q) %s, want 503 with Retry-After saying the session was taken over and to send the turn again with its turn_id",
			a.status, a.retryAfter, a.body)
	}
	again, err := h.postTurn(ctx, ms[0].http, "fenced", "t1", call)
	if err != nil || !again.Replayed || len(again.Messages) != 1 || again.Messages[0].Status != "outcome_unknown" {
		t.Errorf("the turn sent again: %+v %v, want a replay of the interrupted call as outcome_unknown", again, err)
	}
	if ran := strings.Fields(readFile(filepath.Join(ws, "ran.log"))); strings.Join(ran, " ") != "f1" {
		t.Errorf("executions %v, want f1 once", ran)
	}
	h.check(ms, http.DefaultClient)
}
