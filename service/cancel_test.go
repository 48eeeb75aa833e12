package service

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

// slowTurn is a turn whose only call runs for 5 s unless canceled.
func slowTurn(t *testing.T) map[string]any {
	return turn("r1", "all", call(t, "slow", "run_command", map[string]any{"argv": []string{"sleep", "5"}}))
}

// TestClientDisconnectCancelsTurn: a client that goes away mid-turn
// cancels its turn, and the turn is still committed with the call
// canceled.
func TestClientDisconnectCancelsTurn(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	const s = "gone-s"
	events := f.openSSE("GET", "/v1/sessions/"+s+"/events", nil, "")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	began := time.Now()
	done := f.postTurnAsync(ctx, s, slowTurn(t))
	events.until("tool_call_start", "slow")
	cancel()

	res := awaitTurn(t, done)
	if !errors.Is(res.err, context.Canceled) {
		t.Errorf("the canceled request returned %d %v", res.code, res.err)
	}
	result := events.until("tool_result", "slow")
	if result.Status != "canceled" {
		t.Errorf("tool_result status %q, want canceled", result.Status)
	}
	if d := time.Since(began); d >= 5*time.Second {
		t.Errorf("the canceled turn took %v: the command ran to its end", d)
	}

	// The turn is committed in the store, the call canceled.
	turns, err := f.store.Turns(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 1 || len(turns[0].GetToolMessages()) != 1 || turns[0].GetToolMessages()[0].GetStatus() != "canceled" {
		t.Fatalf("persisted turns: %v", turns)
	}
}

// TestShutdownDuringTurn: shutting the service down while a turn runs
// ends the event streams and refuses new turns with 503; closing the
// dispatcher with a short grace cancels the turn, whose result is
// committed and returned.
func TestShutdownDuringTurn(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	const s = "shutdown-s"
	events := f.openSSE("GET", "/v1/sessions/"+s+"/events", nil, "")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	done := f.postTurnAsync(ctx, s, slowTurn(t))
	events.until("tool_call_start", "slow")

	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for {
		if _, err := events.next(); err != nil {
			if err != io.EOF {
				t.Errorf("the event stream ended with %v, want EOF", err)
			}
			break
		}
	}
	checks := []struct {
		name, method, path string
		body               any
		want               int
	}{
		{"new turn", "POST", "/v1/sessions/other/turns", turn("r1", "all", call(t, "c1", "calculate", map[string]any{"expression": "1"})), http.StatusServiceUnavailable},
		{"new event stream", "GET", "/v1/sessions/other/events", nil, http.StatusServiceUnavailable},
		{"health", "GET", "/healthz", nil, http.StatusServiceUnavailable},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if resp, body := f.do(c.method, c.path, c.body); resp.StatusCode != c.want {
				t.Errorf("%s %s: %d %s, want %d", c.method, c.path, resp.StatusCode, body, c.want)
			}
		})
	}

	grace, cancelGrace := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelGrace()
	if err := f.disp.Close(grace); err != nil {
		t.Fatalf("Dispatcher.Close: %v", err)
	}
	res := awaitTurn(t, done)
	if res.code != http.StatusOK || len(res.reply.Messages) != 1 || res.reply.Messages[0].Status != "canceled" {
		t.Fatalf("the running turn returned %d %v %s", res.code, res.err, res.body)
	}
	turns, err := f.store.Turns(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 1 || turns[0].GetToolMessages()[0].GetStatus() != "canceled" {
		t.Fatalf("persisted turns: %v", turns)
	}
	if resp, body := f.do("POST", "/v1/sessions/"+s+"/turns", slowTurn(t)); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a turn after Close: %d %s, want 503", resp.StatusCode, body)
	}
}
