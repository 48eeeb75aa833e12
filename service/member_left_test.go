package service

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/actors"
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
