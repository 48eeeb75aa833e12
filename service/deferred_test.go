package service

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/actors"
)

// TestDeferredApprovalAttacks tries a deferred approval's surfaces on a
// service with a token: listing and answering without the token (401,
// nothing changes), answering it under another session (404), with
// another args_hash (409 mismatch), then with the right one (runs), and
// replaying that answer (409 already_answered); a body's "confirm":"defer"
// does not raise the operator's ceiling, and an unknown mode is a 400.
func TestDeferredApprovalAttacks(t *testing.T) {
	f := newFixture(t, fixtureOpts{token: "tok-3f1e", approve: actors.ApproveAsk})
	body := turn("r", "ask", call(t, "e1", "edit_file", map[string]any{"path": "notes.md", "content": "pwned\n"}))
	body["confirm"] = "defer"
	r := f.postTurn("s", body)
	if got := statuses(r.Messages); len(got) != 1 || got[0] != "awaiting_approval" {
		t.Fatalf("deferred turn: %v", got)
	}
	var pending struct {
		Confirmations []PendingView `json:"confirmations"`
	}
	resp, b := f.do(http.MethodGet, "/v1/pending", nil)
	mustUnmarshal(t, b, &pending)
	if resp.StatusCode != http.StatusOK || len(pending.Confirmations) != 1 || !pending.Confirmations[0].Deferred {
		t.Fatalf("pending: %d %s", resp.StatusCode, b)
	}
	hash := pending.Confirmations[0].ArgsHash

	// Without the token: neither listed nor answered.
	for _, req := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/pending", ""},
		{http.MethodPost, "/v1/sessions/s/confirm/e1", `{"approve":true,"args_hash":"` + hash + `"}`},
	} {
		hr, _ := http.NewRequest(req.method, f.url+req.path, nil)
		if req.body != "" {
			hr, _ = http.NewRequest(req.method, f.url+req.path, strings.NewReader(req.body))
			hr.Header.Set("Content-Type", "application/json")
		}
		resp, err := f.client.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s without the token: %d, want 401", req.method, req.path, resp.StatusCode)
		}
	}
	answer := func(session, hash string) (int, string) {
		resp, b := f.do(http.MethodPost, "/v1/sessions/"+session+"/confirm/e1", map[string]any{"approve": true, "args_hash": hash})
		var st statusReply
		mustUnmarshal(t, b, &st)
		return resp.StatusCode, st.Status
	}
	if code, st := answer("other", hash); code != http.StatusNotFound || st != ackNotFound {
		t.Errorf("the answer under another session: %d %q, want 404 not_found", code, st)
	}
	if code, st := answer("s", "0123"); code != http.StatusConflict || st != ackMismatch {
		t.Errorf("the answer with another args_hash: %d %q, want 409 mismatch", code, st)
	}
	notes := filepath.Join(f.dir, "notes.md")
	if b, _ := os.ReadFile(notes); string(b) != workspaceFiles["notes.md"] {
		t.Fatalf("refused answers changed notes.md: %q", b)
	}
	sse := f.openSSE(http.MethodGet, "/v1/sessions/s/events", nil, "")
	defer sse.close()
	if code, st := answer("s", hash); code != http.StatusOK || st != ackAccepted {
		t.Fatalf("the answer: %d %q", code, st)
	}
	if d := sse.until("tool_result", "e1"); d.Status != "ok" {
		t.Errorf("tool_result of the approved call: %+v", d)
	}
	if b, _ := os.ReadFile(notes); string(b) != "pwned\n" {
		t.Errorf("notes.md after the approval = %q", b)
	}
	if code, st := answer("s", hash); code != http.StatusConflict || st != ackAlreadyAnswered {
		t.Errorf("the replayed answer: %d %q, want 409 already_answered", code, st)
	}

	// "defer" waits differently; it never approves more.
	low := newFixture(t, fixtureOpts{approve: actors.ApproveNone})
	body = turn("r", "all", call(t, "e2", "edit_file", map[string]any{"path": "notes.md", "content": "x\n"}))
	body["confirm"] = "defer"
	if got := statuses(low.postTurn("s", body).Messages); len(got) != 1 || got[0] != "skipped" {
		t.Errorf("confirm defer under the operator's approve none: %v, want skipped", got)
	}
	body["confirm"] = "later"
	if resp, b := low.do(http.MethodPost, "/v1/sessions/s/turns", body); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown confirm mode: %d %s, want 400", resp.StatusCode, b)
	}
}
