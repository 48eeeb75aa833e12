package service

import (
	"context"
	"net/http"
	"strconv"
	"testing"
)

// TestConfirmDecidedResumes: the confirm_decided event of an answered
// confirmation has a sequence number and an SSE id like every other event,
// so a client that reconnects with Last-Event-ID gets it back if it missed
// it, and not again once it had it.
func TestConfirmDecidedResumes(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	const s = "resume-decided"
	events := f.openSSE("GET", "/v1/sessions/"+s+"/events", nil, "")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	done := f.postTurnAsync(ctx, s, turn("r1", "ask",
		call(t, "c1", "edit_file", map[string]any{"path": "resume.txt", "content": "r\n"}),
		call(t, "c2", "calculate", map[string]any{"expression": "6 * 7"})))

	var asked, decided sseEvent
	var askedData eventData
	for asked.Event == "" {
		if ev := events.must(); ev.Event == "tool_confirm" {
			asked = ev
			ev.decode(t, &askedData)
		}
	}
	if resp, body := f.do("POST", "/v1/sessions/"+s+"/confirm/c1",
		map[string]any{"approve": true, "args_hash": askedData.ArgsHash}); resp.StatusCode != http.StatusOK {
		t.Fatalf("approving c1: %d %s", resp.StatusCode, body)
	}
	for decided.Event == "" {
		if ev := events.must(); ev.Event == EventConfirmDecided {
			decided = ev
		}
	}
	var d eventData
	decided.decode(t, &d)
	if decided.ID == "" || decided.ID != strconv.FormatUint(d.Seq, 10) || d.Seq <= askedData.Seq {
		t.Fatalf("%s of c1: id %q, seq %d (tool_confirm had %d): every event needs its sequence number as its SSE id",
			EventConfirmDecided, decided.ID, d.Seq, askedData.Seq)
	}
	if d.CallID != "c1" || d.Status != "approved" {
		t.Errorf("%s = %+v", EventConfirmDecided, d)
	}
	if res := awaitTurn(t, done); res.code != http.StatusOK {
		t.Fatalf("the turn: %d %s", res.code, res.body)
	}

	// Reconnecting after the confirmation: the decision comes first.
	resumed := f.openSSE("GET", "/v1/sessions/"+s+"/events", nil, asked.ID)
	if ev := resumed.must(); ev.Event != EventConfirmDecided || ev.ID != decided.ID {
		t.Errorf("resuming after %s: first event %s id %s, want %s id %s", asked.ID, ev.Event, ev.ID, EventConfirmDecided, decided.ID)
	}
	resumed.close()

	// Reconnecting after the decision: it is not sent again, and what
	// follows comes in sequence order.
	after := f.openSSE("GET", "/v1/sessions/"+s+"/events", nil, decided.ID)
	last := d.Seq
	for {
		ev := after.must()
		var e eventData
		ev.decode(t, &e)
		if ev.Event == EventConfirmDecided || e.Seq <= last {
			t.Fatalf("resuming after %s: got %s seq %d", decided.ID, ev.Event, e.Seq)
		}
		last = e.Seq
		if ev.Event == "tool_result" && e.CallID == "c2" {
			break
		}
	}
}
