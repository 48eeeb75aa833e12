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

	c1 := events.until("tool_confirm", "c1")
	if resp, body := f.do("POST", "/v1/sessions/"+s+"/confirm/c1", map[string]any{"approve": true, "args_hash": c1.ArgsHash}); resp.StatusCode != http.StatusOK {
		t.Fatalf("approving c1: %d %s", resp.StatusCode, body)
	}
	// The next confirmation may be asked before or after the first is
	// announced as decided.
	var decided, c2 eventData
	for seen := 0; seen < 2; {
		ev := events.must()
		var d eventData
		ev.decode(t, &d)
		switch {
		case ev.Event == EventConfirmDecided && d.CallID == "c1":
			decided = d
			seen++
		case ev.Event == "tool_confirm" && d.CallID == "c2":
			c2 = d
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

	if resp, body := f.do("POST", "/v1/sessions/"+s+"/confirm/c2", map[string]any{"approve": false, "reason": "wrong file, use three.txt", "args_hash": c2.ArgsHash}); resp.StatusCode != http.StatusOK {
		t.Fatalf("denying c2: %d %s", resp.StatusCode, body)
	}
	if d := events.until(EventConfirmDecided, "c2"); d.Status != "denied" {
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

// TestPendingShowsDiff: a pending edit_file shows a unified diff against
// the file as it was when the call was asked (the preview its approval is
// bound to), escaped on the page, with when it times out.
func TestPendingShowsDiff(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	const s = "diff-s"
	events := f.openSSE("GET", "/v1/sessions/"+s+"/events", nil, "")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	done := f.postTurnAsync(ctx, s, turn("r1", "ask",
		call(t, "e1", "edit_file", map[string]any{"path": "notes.md", "old_string": "The answer is 42.", "new_string": "The answer is <b>43</b>."})))
	e1 := events.until("tool_confirm", "e1")

	resp, body := f.do("GET", "/v1/pending", nil)
	var pending struct {
		Confirmations []PendingView `json:"confirmations"`
	}
	mustUnmarshal(t, body, &pending)
	if resp.StatusCode != http.StatusOK || len(pending.Confirmations) != 1 {
		t.Fatalf("GET /v1/pending = %d %s", resp.StatusCode, body)
	}
	p := pending.Confirmations[0]
	wantDiff := "--- a/notes.md\n+++ b/notes.md\n@@ -1,2 +1,2 @@\n # Notes\n-The answer is 42.\n+The answer is <b>43</b>.\n"
	if p.Diff != wantDiff {
		t.Errorf("diff:\n%s\nwant:\n%s", p.Diff, wantDiff)
	}
	if !p.TimeoutAt.After(p.Since) {
		t.Errorf("timeout_at %v is not after since %v", p.TimeoutAt, p.Since)
	}
	_, page := f.do("GET", "/", nil)
	for _, want := range []string{`<span class="del">-The answer is 42.</span>`, `<span class="add">&#43;The answer is &lt;b&gt;43&lt;/b&gt;.</span>`, `class="timing"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(string(page), "<b>43</b>") {
		t.Error("the diff reached the page unescaped")
	}
	if resp, body := f.do("POST", "/v1/sessions/"+s+"/confirm/e1", map[string]any{"approve": false, "args_hash": e1.ArgsHash}); resp.StatusCode != http.StatusOK {
		t.Fatalf("deny: %d %s", resp.StatusCode, body)
	}
	awaitTurn(t, done)
}

func TestCommandLine(t *testing.T) {
	tests := []struct {
		name, args, want string
	}{
		{"plain", `{"argv":["go","test","./..."]}`, "go test ./..."},
		{"spaces and quotes", `{"argv":["grep","-n","it's here","a b.txt"]}`, `grep -n 'it'\''s here' 'a b.txt'`},
		{"empty word", `{"argv":["printf",""]}`, "printf ''"},
		{"shell", `{"shell":"ls | wc -l"}`, "sh -c 'ls | wc -l'"},
		{"neither", `{}`, ""},
		{"not json", `nope`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := commandLine(tt.args); got != tt.want {
				t.Errorf("commandLine(%s) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}
