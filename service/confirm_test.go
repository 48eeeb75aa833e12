package service

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWholeRunThroughTheAPI runs a turn that needs confirmations: the
// client learns of them from the session's event stream, approves one and
// denies the other over the API, and reads the session back.
func TestWholeRunThroughTheAPI(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	const s = "run-s1"
	events := f.openSSE("GET", "/v1/sessions/"+s+"/events", nil, "")

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	done := f.postTurnAsync(ctx, s, turn("r1", "ask",
		call(t, "c1", "edit_file", map[string]any{"path": "approved.txt", "content": "yes\n"}),
		call(t, "c2", "edit_file", map[string]any{"path": "denied.txt", "content": "no\n"}),
		call(t, "c3", "calculate", map[string]any{"expression": "6 * 7"}),
	))

	// The first confirmation, as the stream and the pending list show it.
	c1 := events.until("tool_confirm", "c1")
	if c1.ArgsHash == "" || c1.Tool != "edit_file" || c1.Turn != 1 {
		t.Fatalf("tool_confirm of c1 = %+v", c1)
	}
	resp, body := f.do("GET", "/v1/pending", nil)
	var pending struct {
		Confirmations []PendingConfirm `json:"confirmations"`
	}
	mustUnmarshal(t, body, &pending)
	if resp.StatusCode != http.StatusOK || len(pending.Confirmations) != 1 || pending.Confirmations[0].CallID != "c1" ||
		pending.Confirmations[0].ArgsHash != c1.ArgsHash {
		t.Fatalf("GET /v1/pending = %d %s", resp.StatusCode, body)
	}

	// Approve c1 with the args_hash its tool_confirm carried.
	confirm := func(callID string, body map[string]any) (int, statusReply) {
		t.Helper()
		resp, data := f.do("POST", "/v1/sessions/"+s+"/confirm/"+callID, body)
		var r statusReply
		mustUnmarshal(t, data, &r)
		return resp.StatusCode, r
	}
	if code, r := confirm("c1", map[string]any{"approve": true, "args_hash": c1.ArgsHash}); code != http.StatusOK || r.Status != "accepted" {
		t.Fatalf("approving c1: %d %+v", code, r)
	}

	c2 := events.until("tool_confirm", "c2")
	tests := []struct {
		name     string
		callID   string
		body     map[string]any
		wantCode int
		want     string
	}{
		{"confirm again", "c1", map[string]any{"approve": true, "args_hash": c1.ArgsHash}, http.StatusConflict, "already_answered"},
		{"wrong args_hash", "c2", map[string]any{"approve": true, "args_hash": "0000"}, http.StatusConflict, "mismatch"},
		{"unknown call", "nope", map[string]any{"approve": true, "args_hash": c2.ArgsHash}, http.StatusNotFound, "not_found"},
		{"deny", "c2", map[string]any{"approve": false, "reason": "not this one", "args_hash": c2.ArgsHash}, http.StatusOK, "accepted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, r := confirm(tt.callID, tt.body)
			if code != tt.wantCode || r.Status != tt.want {
				t.Errorf("confirm %s: %d %+v, want %d %s", tt.callID, code, r, tt.wantCode, tt.want)
			}
		})
	}

	res := awaitTurn(t, done)
	if res.err != nil || res.code != http.StatusOK {
		t.Fatalf("turn: %d %v %s", res.code, res.err, res.body)
	}
	if diff := cmp.Diff([]string{"ok", "skipped", "ok"}, statuses(res.reply.Messages)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if got := res.reply.Messages[2].Content; got != "42" {
		t.Errorf("calculate = %q, want 42", got)
	}
	if b, err := os.ReadFile(filepath.Join(f.dir, "approved.txt")); err != nil || string(b) != "yes\n" {
		t.Errorf("approved.txt = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "denied.txt")); !os.IsNotExist(err) {
		t.Errorf("denied.txt exists after the call was denied (%v)", err)
	}

	// The session read back shows every call's status.
	resp, body = f.do("GET", "/v1/sessions/"+s, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET session: %d %s", resp.StatusCode, body)
	}
	var sess struct {
		Tools         []toolMessage     `json:"tools"`
		ToolHistories []json.RawMessage `json:"tool_histories"`
	}
	mustUnmarshal(t, body, &sess)
	if diff := cmp.Diff([]string{"ok", "skipped", "ok"}, statuses(sess.Tools)); diff != "" {
		t.Errorf("persisted statuses (-want +got):\n%s", diff)
	}
	if len(sess.ToolHistories) != 4 {
		t.Errorf("tool_histories has %d messages, want the assistant message and 3 tool messages", len(sess.ToolHistories))
	}
	var first assistantMessage
	mustUnmarshal(t, sess.ToolHistories[0], &first)
	if first.Role != "assistant" || len(first.ToolCalls) != 3 {
		t.Errorf("tool_histories[0] = %+v", first)
	}

	// Nothing waits any more; the call was answered (denied) and is
	// committed, so a later answer is a second answer.
	if p := f.broker.Pending(s); len(p) != 0 {
		t.Errorf("pending after the turn: %+v", p)
	}
	if code, r := confirm("c2", map[string]any{"approve": true, "args_hash": c2.ArgsHash}); code != http.StatusConflict || r.Status != "already_answered" {
		t.Errorf("confirm after the turn: %d %+v, want 409 already_answered", code, r)
	}

	// Ending the run.
	if resp, body := f.do("DELETE", "/v1/sessions/"+s+"/runs/r1", nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE run: %d %s", resp.StatusCode, body)
	}
}

// TestConfirmationReplayedToNewSubscriber: a client that subscribes after
// the confirmation was asked still gets it.
func TestConfirmationReplayedToNewSubscriber(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	const s = "late-s"
	first := f.openSSE("GET", "/v1/sessions/"+s+"/events", nil, "")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	done := f.postTurnAsync(ctx, s, turn("r1", "ask",
		call(t, "c1", "edit_file", map[string]any{"path": "late.txt", "content": "x"})))
	asked := first.until("tool_confirm", "c1")

	late := f.openSSE("GET", "/v1/sessions/"+s+"/events", nil, "")
	again := late.until("tool_confirm", "c1")
	if again.Seq != asked.Seq || again.ArgsHash != asked.ArgsHash {
		t.Errorf("replayed confirmation %+v, want %+v", again, asked)
	}
	resp, body := f.do("POST", "/v1/sessions/"+s+"/confirm/c1", map[string]any{"approve": false, "args_hash": asked.ArgsHash})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("deny: %d %s", resp.StatusCode, body)
	}
	res := awaitTurn(t, done)
	if res.code != http.StatusOK || res.reply.Messages[0].Status != "skipped" {
		t.Errorf("turn: %d %s", res.code, res.body)
	}
}

// TestConfirmAnswerIsBoundAndUsedOnce: an answer names the call and the
// hash of its canonical arguments (args_hash is required); once the
// confirmation is settled, another answer is 409 already_answered, also
// after the turn ended, and a call that never asked is 404.
func TestConfirmAnswerIsBoundAndUsedOnce(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	const s = "bound-s"
	events := f.openSSE("GET", "/v1/sessions/"+s+"/events", nil, "")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	done := f.postTurnAsync(ctx, s, turn("r1", "ask",
		call(t, "c1", "edit_file", map[string]any{"path": "bound.txt", "content": "b\n"})))
	asked := events.until("tool_confirm", "c1")

	confirm := func(callID string, body map[string]any) (int, []byte) {
		t.Helper()
		resp, data := f.do("POST", "/v1/sessions/"+s+"/confirm/"+callID, body)
		return resp.StatusCode, data
	}
	code, body := confirm("c1", map[string]any{"approve": true})
	var e errorBody
	mustUnmarshal(t, body, &e)
	if code != http.StatusBadRequest || !strings.Contains(e.Error, `"args_hash" is required`) {
		t.Fatalf("a confirmation without args_hash: %d %s, want 400 naming args_hash", code, body)
	}
	if len(f.broker.Pending(s)) != 1 {
		t.Fatalf("the refused answer settled the confirmation: pending %+v", f.broker.Pending(s))
	}
	if code, body := confirm("c1", map[string]any{"approve": true, "args_hash": asked.ArgsHash}); code != http.StatusOK {
		t.Fatalf("approving c1: %d %s", code, body)
	}
	if res := awaitTurn(t, done); res.code != http.StatusOK || res.reply.Messages[0].Status != "ok" {
		t.Fatalf("the turn: %d %s", res.code, res.body)
	}

	for _, approve := range []bool{true, false} {
		code, body := confirm("c1", map[string]any{"approve": approve, "args_hash": asked.ArgsHash})
		var r statusReply
		mustUnmarshal(t, body, &r)
		if code != http.StatusConflict || r.Status != "already_answered" {
			t.Errorf("answering c1 again (approve %v) after its turn: %d %s, want 409 already_answered", approve, code, body)
		}
	}
	code, body = confirm("never", map[string]any{"approve": true, "args_hash": asked.ArgsHash})
	var r statusReply
	mustUnmarshal(t, body, &r)
	if code != http.StatusNotFound || r.Status != "not_found" {
		t.Errorf("a call that never asked: %d %s, want 404 not_found", code, body)
	}
}
