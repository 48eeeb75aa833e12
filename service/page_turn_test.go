package service

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// mcpDelete stands for an MCP server's tool that changes things: its
// registered name says which server it goes to.
func mcpDelete() toolkit.Tool {
	return toolkit.Tool{Name: "mcp__files__delete", Description: "Delete a file (MCP).", Source: toolkit.SourceMCP,
		Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) {
			return toolkit.Result{Content: "deleted"}, nil
		}}
}

// turnWithText is turn() with the model's own text in the message.
func turnWithText(run, approve, text string, calls ...map[string]any) map[string]any {
	t := turn(run, approve, calls...)
	t["message"].(map[string]any)["content"] = text
	return t
}

// TestPendingShowsTheWholeTurn: a pending confirmation shows, over GET
// /v1/pending?include=turn (its turn, once) and on the rendered page, the
// model's text of its turn, the turn's calls with their states in plain
// words (the model's text as text, never markup), and the calls queued
// after it that will ask (asked one at a time, SPEC §3 rule 9) as "next"
// with their command line or MCP server; a call queued that will not ask
// is listed as not checked yet. Without include=turn the item carries
// its own call and names its turn, not the turn.
func TestPendingShowsTheWholeTurn(t *testing.T) {
	f := newFixture(t, fixtureOpts{tools: []toolkit.Tool{mcpDelete()}})
	const text = "I will add a line to p.txt, clean the build directory and delete <b>old.txt</b> on the file server, then check the sum."
	events := f.openSSE("GET", "/v1/sessions/turn-s/events", nil, "")
	done := f.postTurnAsync(t.Context(), "turn-s", turnWithText("r1", "ask", text,
		call(t, "c0", "calculate", map[string]any{"expression": "1 + 1"}),
		call(t, "e1", "edit_file", map[string]any{"path": "p.txt", "content": "p\n"}),
		call(t, "x1", "run_command", map[string]any{"argv": []string{"rm", "-r", "build dir"}}),
		call(t, "m1", "mcp__files__delete", map[string]any{"path": "old.txt"}),
		call(t, "c2", "calculate", map[string]any{"expression": "2 + 2"})))
	asked := events.until("tool_confirm", "e1")

	resp, body := f.do("GET", "/v1/pending", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/pending: %d %s", resp.StatusCode, body)
	}
	var pending struct {
		Confirmations []map[string]any `json:"confirmations"`
		Turns         []map[string]any `json:"turns"`
	}
	mustUnmarshal(t, body, &pending)
	if len(pending.Confirmations) != 1 || pending.Confirmations[0]["call_id"] != "e1" || pending.Confirmations[0]["turn"] != 1.0 {
		t.Fatalf("%d confirmations pending, want e1's naming turn 1: %s", len(pending.Confirmations), body)
	}
	for _, k := range []string{"turn_text", "calls", "next", "upcoming"} {
		if _, ok := pending.Confirmations[0][k]; ok || pending.Turns != nil {
			t.Errorf("without include=turn the item carries %q or the reply its turns: %s", k, body)
		}
	}
	resp, body = f.do("GET", "/v1/pending?include=turn", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/pending?include=turn: %d %s", resp.StatusCode, body)
	}
	mustUnmarshal(t, body, &pending)
	if len(pending.Turns) != 1 || pending.Turns[0]["asking"] != "e1" {
		t.Fatalf("%d turns, want e1's, asking e1: %s", len(pending.Turns), body)
	}
	p := pending.Turns[0]
	if p["text"] != text {
		t.Errorf("e1's turn text = %v, want the model's text", p["text"])
	}
	var calls []string
	for _, c := range asList(p["calls"]) {
		calls = append(calls, fmt.Sprintf("%v:%v:%v", c["call_id"], c["status"], c["words"]))
	}
	wantCalls := "c0:ready:checked, runs after the answers e1:confirm:waits for your answer x1:next:asks you next m1:next:asks you next c2:upcoming:not checked yet"
	if got := strings.Join(calls, " "); got != wantCalls {
		t.Errorf("e1's turn calls:\n got %s\nwant %s", got, wantCalls)
	}
	var next []string
	for _, n := range asList(p["next"]) {
		next = append(next, fmt.Sprintf("%v|%v|%v", n["call_id"], n["command"], n["mcp_server"]))
	}
	wantNext := "x1|rm -r 'build dir'|<nil> m1|<nil>|files"
	if got := strings.Join(next, " "); got != wantNext {
		t.Errorf("queued after e1:\n got %s\nwant %s", got, wantNext)
	}

	_, body = f.do("GET", "/", nil)
	page := string(body)
	for _, want := range []string{
		`<blockquote>` + template.HTMLEscapeString(text) + `</blockquote>`,
		`<tr data-call-id="e1" data-status="confirm" class="this">`,
		`<td class="status">this one: waits for your answer</td>`,
		`<li class="next" data-session="turn-s" data-call-id="x1" data-after="e1" data-turn="1">`,
		`<pre class="command">$ rm -r &#39;build dir&#39;</pre>`,
		`<li class="next" data-session="turn-s" data-call-id="m1" data-after="e1" data-turn="1">`,
		`<p class="mcp-server">MCP server <code>files</code></p>`,
		`<td class="status">not checked yet</td>`,
		`times out at`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(page, "<b>old.txt</b>") {
		t.Error("the model's text reached the page as markup")
	}

	// Answered, the next one asks with its own preview and what still
	// follows it.
	if resp, body := f.do("POST", "/v1/sessions/turn-s/confirm/e1", map[string]any{"approve": false, "args_hash": asked.ArgsHash}); resp.StatusCode != http.StatusOK {
		t.Fatalf("deny e1: %d %s", resp.StatusCode, body)
	}
	asked = events.until("tool_confirm", "x1")
	_, body = f.do("GET", "/v1/pending?include=turn", nil)
	mustUnmarshal(t, body, &pending)
	if len(pending.Confirmations) != 1 || pending.Confirmations[0]["command"] != "rm -r 'build dir'" || len(pending.Turns) != 1 ||
		len(asList(pending.Turns[0]["next"])) != 1 {
		t.Errorf("after e1: %s", body)
	}
	for _, id := range []string{"x1", "m1"} {
		if id == "m1" {
			asked = events.until("tool_confirm", "m1")
		}
		if resp, body := f.do("POST", "/v1/sessions/turn-s/confirm/"+id, map[string]any{"approve": false, "args_hash": asked.ArgsHash}); resp.StatusCode != http.StatusOK {
			t.Fatalf("deny %s: %d %s", id, resp.StatusCode, body)
		}
	}
	res := awaitTurn(t, done)
	if got := strings.Join(statuses(res.reply.Messages), ","); got != "ok,skipped,skipped,skipped,ok" {
		t.Errorf("the turn: %s", got)
	}
}

// asList reads a JSON array of objects decoded into any.
func asList(v any) []map[string]any {
	var out []map[string]any
	for _, e := range asAnySlice(v) {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func asAnySlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// TestRequestLine: an http_request call is shown as its method and URL,
// then the names of its headers and its body's size, never their values.
func TestRequestLine(t *testing.T) {
	tests := []struct {
		name, args, want string
	}{
		{"get by default", `{"url":"https://api.example.com/v1/items"}`, "GET https://api.example.com/v1/items"},
		{"post with headers and body", `{"method":"POST","url":"https://x.test/a","headers":{"X-B":"${secret:B}","Content-Type":"application/json"},"body":"{\"a\":1}"}`,
			"POST https://x.test/a\nheaders: Content-Type, X-B\nbody: 7 bytes"},
		{"no url", `{"method":"DELETE"}`, ""},
		{"not json", `{"url":`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := requestLine(tt.args); got != tt.want {
				t.Errorf("requestLine(%s) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
	if _, req, _ := change("http_request", `{"method":"PUT","url":"http://h/"}`); req != "PUT http://h/" {
		t.Errorf("change of http_request = %q", req)
	}
	if _, _, srv := change("mcp__git_hub__create_issue", `{}`); srv != "git_hub" {
		t.Errorf("change of an MCP tool names server %q, want git_hub", srv)
	}
}

// TestPendingWithoutDeadline: a confirmation with no deadline (a deferred
// approval) reads "waits until answered", with no time-out for page.js to
// count down; one with a deadline says when it times out.
func TestPendingWithoutDeadline(t *testing.T) {
	page, err := parsePage("page.html")
	if err != nil {
		t.Fatal(err)
	}
	since := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		timeoutAt *time.Time
		want      string
		deadline  bool
	}{
		{"deferred", nil, "waits until answered", false},
		{"blocking", new(since.Add(5 * time.Minute)), "times out at 09:35:00 UTC", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := PendingView{Session: "s", Turn: 1, CallID: "c1", Tool: "edit_file", Since: since, TimeoutAt: tc.timeoutAt}
			var b strings.Builder
			if err := page.Execute(&b, &pageData{Confirms: []pageConfirm{{PendingView: v}}, StatusWords: statusWordsJSON()}); err != nil {
				t.Fatal(err)
			}
			html := b.String()
			if !strings.Contains(html, tc.want) || strings.Contains(html, "data-timeout-at=") != tc.deadline {
				t.Errorf("the timing of a %s confirmation: %s", tc.name, html[strings.Index(html, `<p class="timing"`):][:300])
			}
		})
	}
}
