package service

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// TestTurnOutcomeMemberLeft: a turn whose cluster member left before it
// answered is a 503 that says so and that the calls' outcome is unknown,
// not a bare 500.
func TestTurnOutcomeMemberLeft(t *testing.T) {
	var s Server
	err := fmt.Errorf("dispatching turn of session %q: %w", "s", actors.ErrMemberLeft)
	code, body := s.turnOutcome(&messages.DispatchTurn{Session: "s"}, nil, err, messages.Shape(""))
	f, ok := body.(turnFailure)
	if code != http.StatusServiceUnavailable || !ok || !strings.Contains(f.Error, "left the cluster") || !strings.Contains(f.Error, "outcome_unknown") {
		t.Fatalf("turnOutcome = %d %+v", code, body)
	}
	rec := httptest.NewRecorder()
	writeTurnOutcome(rec, code, body)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != drainRetryAfter {
		t.Fatalf("the written outcome: %d Retry-After %q, want 503 and %q", rec.Code, rec.Header().Get("Retry-After"), drainRetryAfter)
	}
}

// TestTurnOutcomeNoHost: a turn for which no member could host the
// session's grain (a rolling restart moved it while every lookup failed)
// ran nothing; it is a 503 with Retry-After that says so, so a client
// sends it again, not a bare 500 "the turn failed" (seen in
// TestClusterRollingRestart under load: 2 of 493 turns).
func TestTurnOutcomeNoHost(t *testing.T) {
	var s Server
	err := fmt.Errorf("dispatching turn of session %q: %w", "s", fmt.Errorf("session %q: %w", "s", actors.ErrNoHost))
	code, body := s.turnOutcome(&messages.DispatchTurn{Session: "s"}, nil, err, messages.Shape(""))
	f, ok := body.(turnFailure)
	if code != http.StatusServiceUnavailable || !ok || !strings.Contains(f.Error, "nothing ran") {
		t.Fatalf("turnOutcome = %d %+v, want 503 saying nothing ran", code, body)
	}
	rec := httptest.NewRecorder()
	writeTurnOutcome(rec, code, body)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != drainRetryAfter {
		t.Fatalf("the written outcome: %d Retry-After %q, want 503 and %q", rec.Code, rec.Header().Get("Retry-After"), drainRetryAfter)
	}
}

// TestRepliesWhileTheGrainMoves: a confirmation, an answer, a client result
// or a run's end that reached no grain (none could host the session, or its
// member left) is a 503 with Retry-After naming the reason, not a 500
// "failed".
func TestRepliesWhileTheGrainMoves(t *testing.T) {
	for _, cause := range []error{actors.ErrNoHost, actors.ErrMemberLeft} {
		var s Server
		rec := httptest.NewRecorder()
		s.dispatcherError(rec, "confirming", fmt.Errorf("confirming call %q: %w", "c1", cause))
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != drainRetryAfter || !strings.Contains(rec.Body.String(), cause.Error()[:20]) {
			t.Errorf("%v: %d Retry-After %q %s, want 503, %q and the reason", cause, rec.Code, rec.Header().Get("Retry-After"), rec.Body, drainRetryAfter)
		}
	}
}

// TestTurnOutcomeFenced: a turn whose commit the store refused because
// another writer took the session over (a grain activated on another
// member) is a 503 with Retry-After telling the client to send it again
// with its turn_id, not a 500 "the turn failed" (TestClusterRollingRestart
// under load: 1 of 659 turns).
func TestTurnOutcomeFenced(t *testing.T) {
	var s Server
	err := fmt.Errorf("dispatching turn of session %q: %w", "s", fmt.Errorf("committing the turn: %w", cachestore.ErrFenced))
	code, body := s.turnOutcome(&messages.DispatchTurn{Session: "s"}, &messages.TurnResult{Turn: 3}, err, messages.Shape(""))
	f, ok := body.(turnFailure)
	if code != http.StatusServiceUnavailable || !ok || !strings.Contains(f.Error, "taken over") || !strings.Contains(f.Error, "turn_id") {
		t.Fatalf("turnOutcome = %d %+v, want 503 saying the session was taken over and to send the turn again", code, body)
	}
	rec := httptest.NewRecorder()
	writeTurnOutcome(rec, code, body)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != drainRetryAfter {
		t.Fatalf("the written outcome: %d Retry-After %q, want 503 and %q", rec.Code, rec.Header().Get("Retry-After"), drainRetryAfter)
	}
}
