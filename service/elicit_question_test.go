package service

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Decline declines a question, as the serve command does.
func (r *dispatcherReplies) Decline(ctx context.Context, session, callID string) error {
	return r.d.Answer(ctx, session, callID, "", true)
}

// askForPassword is a tool that passes on an MCP server's request for a
// password, as toolkit/mcp does: the note warns, the answer must be an
// object with a string "password".
func askForPassword() toolkit.Tool {
	return toolkit.Tool{Name: "mcp__bank__login", Description: "Logs in.", ReadOnly: true,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			a, err := c.Ask(ctx, toolkit.Question{Kind: toolkit.QuestionElicit, Text: "Your bank password, please.",
				Schema: []byte(`{"type":"object","properties":{"password":{"type":"string"}},"required":["password"]}`),
				Note: `Asked by MCP server "bank", not by tooldispatch. Warning: it asks for what looks like a secret ("password"). ` +
					`Secrets go through store_secret.`,
				Validate: func(a toolkit.Answer) error {
					if !strings.Contains(a.Text, `"password"`) {
						return errors.New(`missing required field "password"`)
					}
					return nil
				}})
			switch {
			case err != nil:
				return toolkit.Result{}, err
			case a.Declined:
				return toolkit.Result{Content: "declined"}, nil
			}
			return toolkit.Result{Content: "answered"}, nil
		}}
}

// TestElicitationQuestionOnThePage: an MCP server's request for input is
// pending with its schema and note; the operator page shows who asks, the
// warning of a request for a secret (styled as one), the schema and a
// Decline button; an answer that does not match is refused with 400 and
// the question stays; a decline over the API reaches the tool.
func TestElicitationQuestionOnThePage(t *testing.T) {
	r := &dispatcherReplies{}
	f := newFixture(t, fixtureOpts{replies: r, tools: []toolkit.Tool{askForPassword()}})
	r.d = f.disp
	events := f.openSSE("GET", "/v1/sessions/el-s/events", nil, "")
	done := f.postTurnAsync(t.Context(), "el-s", turn("r1", "all", call(t, "p1", "mcp__bank__login", map[string]any{})))
	events.until(toolkit.QuestionElicit, "p1")

	var pending struct {
		Questions []PendingQuestion `json:"questions"`
	}
	resp, body := f.do("GET", "/v1/pending", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pending: %d %s", resp.StatusCode, body)
	}
	mustUnmarshal(t, body, &pending)
	if len(pending.Questions) != 1 || !strings.Contains(string(pending.Questions[0].Schema), `"password"`) ||
		!strings.Contains(pending.Questions[0].Note, "Warning:") {
		t.Fatalf("pending questions: %s", body)
	}

	_, body = f.do("GET", "/", nil)
	page := string(body)
	for _, part := range []string{
		`data-call-id="p1" data-elicit="true"`,
		`<p class="elicit-note warning">Asked by MCP server &#34;bank&#34;, not by tooldispatch. Warning:`,
		`<summary>Requested fields (JSON Schema)</summary><pre class="args">{`,
		`&#34;required&#34;: [`,
		`<button type="button" class="decline">Decline</button>`,
	} {
		if !strings.Contains(page, part) {
			t.Errorf("the page lacks %s", part)
		}
	}

	resp, body = f.do("POST", "/v1/sessions/el-s/answer/p1", map[string]any{"content": map[string]any{"user": "ada"}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `missing required field \"password\"`) {
		t.Errorf("an answer without the field: %d %s; want 400 naming it", resp.StatusCode, body)
	}
	for _, bad := range []map[string]any{
		{"content": map[string]any{"password": "x"}, "text": `{"password":"y"}`},
		{"content": "hunter2"},
		{"content": []any{"password", "x"}},
	} {
		resp, body = f.do("POST", "/v1/sessions/el-s/answer/p1", bad)
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "hunter2") {
			t.Errorf("answer %v: %d %s; want 400 without the value", bad, resp.StatusCode, body)
		}
	}
	resp, body = f.do("POST", "/v1/sessions/el-s/answer/p1", map[string]any{"declined": true})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("decline: %d %s", resp.StatusCode, body)
	}
	if res := awaitTurn(t, done); len(res.reply.Messages) != 1 || res.reply.Messages[0].Content != "declined" {
		t.Errorf("the turn: %+v; want the tool to get the decline", res.reply)
	}
}
