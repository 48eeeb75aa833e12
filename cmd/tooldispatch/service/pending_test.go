package service

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestAnsweredConfirmationLeavesPending: an approved confirmation leaves
// the pending list and the event stream says so at once, while the turn
// still waits for the next confirmation; a denied one too, with the
// operator's reason in the model's tool message.
func TestAnsweredConfirmationLeavesPending(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	const s = "answered-s"
	events := f.openSSE("GET", "/v1/events", nil, "")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	done := f.postTurnAsync(ctx, s, turn("r1", "ask",
		call(t, "c1", "edit_file", map[string]any{"path": "one.txt", "content": "1\n"}),
		call(t, "c2", "edit_file", map[string]any{"path": "two.txt", "content": "2\n"})))

	events.until("tool_confirm", "c1")
	if resp, body := f.do("POST", "/v1/sessions/"+s+"/confirm/c1", map[string]any{"approve": true}); resp.StatusCode != http.StatusOK {
		t.Fatalf("approving c1: %d %s", resp.StatusCode, body)
	}
	// The next confirmation may be asked before or after the first is
	// announced as decided.
	var decided eventData
	for seen := 0; seen < 2; {
		ev := events.must()
		var d eventData
		ev.decode(t, &d)
		switch {
		case ev.Event == EventConfirmDecided && d.CallID == "c1":
			decided = d
			seen++
		case ev.Event == "tool_confirm" && d.CallID == "c2":
			seen++
		}
	}
	if decided.Status != "approved" || decided.Session != s {
		t.Errorf("%s of c1 = %+v, want status approved", EventConfirmDecided, decided)
	}
	for _, p := range f.broker.Pending(s) {
		if p.CallID == "c1" {
			t.Errorf("c1 is still pending after it was approved: %+v", p)
		}
	}

	if resp, body := f.do("POST", "/v1/sessions/"+s+"/confirm/c2", map[string]any{"approve": false, "reason": "wrong file, use three.txt"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("denying c2: %d %s", resp.StatusCode, body)
	}
	if d := events.until(EventConfirmDecided, "c2"); d.Status != "denied" && d.Status != "skipped" {
		t.Errorf("%s of c2 = %+v, want status denied", EventConfirmDecided, d)
	}
	res := awaitTurn(t, done)
	if res.code != http.StatusOK || len(res.reply.Messages) != 2 || res.reply.Messages[1].Status != "skipped" {
		t.Fatalf("the turn: %d %s", res.code, res.body)
	}
	if got := res.reply.Messages[1].Content; !strings.Contains(got, "wrong file, use three.txt") {
		t.Errorf("the denied call's tool message %q lacks the operator's reason", got)
	}
	if p := f.broker.Pending(""); len(p) != 0 {
		t.Errorf("pending after the turn: %+v", p)
	}
}
