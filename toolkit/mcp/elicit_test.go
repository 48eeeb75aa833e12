package mcp

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp/mcptest"
)

// elicitingServer is a go-sdk server whose tools ask the user for input
// during the call and say what they got. In process, the session speaks
// 2026-07-28, where a tool asks by answering with input requests and is
// called again with the responses (multi round-trip requests); the SDK
// asks an older client with elicitation/create instead.
func elicitingServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	add := func(name, message string, schema map[string]any) {
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: "Asks."},
			func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				resp, ok := req.Params.InputResponses["q"]
				if !ok {
					return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
						"q": &mcp.ElicitParams{Message: message, RequestedSchema: schema}}}, nil, nil
				}
				res, ok := resp.(*mcp.ElicitResult)
				if !ok {
					return textResult(fmt.Sprintf("error: a %T", resp)), nil, nil
				}
				return textResult(fmt.Sprintf("%s %v", res.Action, res.Content)), nil, nil
			})
	}
	add("signup", "Your name and age, please.", map[string]any{"type": "object",
		"properties": map[string]any{"name": map[string]any{"type": "string"}, "age": map[string]any{"type": "integer", "minimum": 0}},
		"required":   []any{"name"}})
	add("login", "Log in to continue.", map[string]any{"type": "object",
		"properties": map[string]any{"user": map[string]any{"type": "string"}, "password": map[string]any{"type": "string", "title": "Password"}}})
	return srv
}

// askCall runs tool with an Asker that answers with ask.
func (h *harness) askCall(name string, ask toolkit.Asker) (string, error) {
	h.t.Helper()
	tool := h.tool(name)
	a, _ := toolkit.ParseArgs(`{}`, toolkit.Limits{})
	ctx, cancel := context.WithTimeout(context.Background(), tool.EffectiveTimeout())
	defer cancel()
	res, err := tool.Handler(ctx, &toolkit.Call{ID: "c1", Name: name, Args: a, Emit: func(string) {}, Ask: ask})
	return res.Content, err
}

// TestElicitationGoesToThePerson: a server's request for input during a
// call is put to the person behind the call, the server named and its
// schema given; an answer that does not match the schema is refused (the
// fields named) and the question keeps waiting; a matching answer reaches
// the server, a decline too; nobody to ask, or no asker at all, is a
// decline, never an answer made up. A request for what looks like a
// secret is shown with a warning.
func TestElicitationGoesToThePerson(t *testing.T) {
	h := newHarness(t, []ServerConfig{{Name: "asker", Server: elicitingServer()}})
	h.start()

	var asked toolkit.Question
	got, err := h.askCall("mcp__asker__signup", func(_ context.Context, q toolkit.Question) (toolkit.Answer, error) {
		asked = q
		if err := q.Validate(toolkit.Answer{Text: `{"age":-1}`}); err == nil ||
			!strings.Contains(err.Error(), `missing required field "name"`) || !strings.Contains(err.Error(), `"age"`) {
			t.Errorf("a wrong answer: %v; want it refused, naming the fields", err)
		}
		if err := q.Validate(toolkit.Answer{Text: `Ada, 36`}); err == nil {
			t.Error("an answer that is not JSON was taken")
		}
		return toolkit.Answer{Text: `{"name":"Ada","age":36}`}, nil
	})
	if err != nil || got != "accept map[age:36 name:Ada]" {
		t.Errorf("signup = %q, %v; want the server to get the answer", got, err)
	}
	if asked.Kind != toolkit.QuestionElicit || asked.Text != "Your name and age, please." || !strings.Contains(string(asked.Schema), `"age"`) {
		t.Errorf("question = %+v; want the server's message and schema", asked)
	}
	if !strings.Contains(asked.Note, `MCP server "asker"`) || strings.Contains(asked.Note, "Warning") {
		t.Errorf("note = %q; want the server named, no warning", asked.Note)
	}

	for name, ask := range map[string]toolkit.Asker{
		"declined": func(context.Context, toolkit.Question) (toolkit.Answer, error) {
			return toolkit.Answer{Declined: true}, nil
		},
		"nobody": func(context.Context, toolkit.Question) (toolkit.Answer, error) {
			return toolkit.Answer{}, toolkit.ErrNobodyToAsk
		},
		"no asker": nil,
	} {
		if got, err := h.askCall("mcp__asker__signup", ask); err != nil || got != "decline map[]" {
			t.Errorf("%s: signup = %q, %v; want a decline", name, got, err)
		}
	}

	got, err = h.askCall("mcp__asker__login", func(_ context.Context, q toolkit.Question) (toolkit.Answer, error) {
		asked = q
		return toolkit.Answer{Declined: true}, nil
	})
	if err != nil || got != "decline map[]" {
		t.Errorf("login = %q, %v", got, err)
	}
	if !strings.Contains(asked.Note, `Warning: it asks for what looks like a secret ("password")`) || !strings.Contains(asked.Note, "store_secret") {
		t.Errorf("note of a request for a password = %q; want a warning pointing to store_secret", asked.Note)
	}
}

// TestElicitationOfNoSingleCallIsDeclined: a server that asks for input
// while two of its calls are in flight gives no way to tell whose person
// to ask: declined, and neither call's person is asked.
func TestElicitationOfNoSingleCallIsDeclined(t *testing.T) {
	srv, _ := misbehavingServer(t, "pair", mcptest.ModeElicitPair)
	h := newHarness(t, []ServerConfig{srv})
	h.start()
	var wg sync.WaitGroup
	results := make([]string, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := h.askCall("mcp__pair__ask", func(context.Context, toolkit.Question) (toolkit.Answer, error) {
				t.Errorf("call %d's person was asked", i)
				return toolkit.Answer{Text: `{"answer":"mine"}`}, nil
			})
			if err != nil {
				got = err.Error()
			}
			results[i] = got
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r != "action: decline" {
			t.Errorf("call %d = %q; want the elicitation declined", i, r)
		}
	}
}
