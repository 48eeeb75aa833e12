package service

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// openAIToolMessageSchema compiles the OpenAI chat-completions tool message
// schema (no properties besides role, tool_call_id and content).
func openAIToolMessageSchema(t *testing.T) *toolkit.Schema {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "messages", "testdata", "openai_tool_message.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := toolkit.NewSchemaCache().Compile(b)
	if err != nil {
		t.Fatalf("compiling the tool message schema: %v", err)
	}
	return s
}

// TestAssistantMessageExtrasAccepted: fields of an assistant message the
// dispatcher has no use for (OpenRouter's reasoning_details, refusal,
// annotations, audio, anything else) are ignored; the body's own fields
// stay strict.
func TestAssistantMessageExtrasAccepted(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	body := turn("r1", "all", call(t, "c1", "read_files", map[string]any{"paths": []string{"notes.md"}}))
	msg := body["message"].(map[string]any)
	msg["reasoning_details"] = []any{map[string]any{"type": "reasoning.encrypted", "data": "…"}}
	msg["refusal"] = nil
	msg["annotations"] = []any{}
	msg["audio"] = nil
	msg["some_future_field"] = map[string]any{"x": 1}
	msg["tool_calls"].([]map[string]any)[0]["index"] = 0
	r := f.postTurn("x1", body)
	if diff := cmp.Diff([]string{"ok"}, statuses(r.Messages)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	body["bogus"] = 1
	resp, data := f.do("POST", "/v1/sessions/x1/turns", body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), `unknown field \"bogus\"`) {
		t.Errorf("an unknown body field: %d %s, want 400 naming it", resp.StatusCode, data)
	}
}

// TestOpenAIStrictReply: "reply":"openai-strict" answers with tool messages
// that validate against OpenAI's schema, plain and streamed; the statuses
// stay in the events.
func TestOpenAIStrictReply(t *testing.T) {
	schema := openAIToolMessageSchema(t)
	f := newFixture(t, fixtureOpts{})
	body := turn("r1", "none",
		call(t, "c1", "read_files", map[string]any{"paths": []string{"notes.md"}}),
		call(t, "c2", "edit_file", map[string]any{"path": "notes.md", "content": "x"}),
		call(t, "c3", "no_such_tool", map[string]any{}))
	body["reply"] = "openai-strict"
	check := func(where string, data []byte) {
		t.Helper()
		var reply struct {
			Turn     int64            `json:"turn"`
			Messages []map[string]any `json:"messages"`
		}
		mustUnmarshal(t, data, &reply)
		if len(reply.Messages) != 3 {
			t.Fatalf("%s: %d messages, want 3: %s", where, len(reply.Messages), data)
		}
		for _, m := range reply.Messages {
			if err := schema.Validate(m); err != nil {
				t.Errorf("%s: %v does not validate against the OpenAI schema: %v", where, m, err)
			}
		}
	}
	resp, data := f.do("POST", "/v1/sessions/strict/turns", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST turn: %d %s", resp.StatusCode, data)
	}
	check("reply", data)

	body["turn_id"] = "t2"
	stream := f.openSSE("POST", "/v1/sessions/strict2/turns", body, "")
	got := map[string]string{}
	for {
		ev := stream.must()
		if ev.Event == eventResult {
			check("streamed reply", []byte(ev.Data))
			break
		}
		if ev.Event == actors.EventToolResult {
			var d eventData
			ev.decode(t, &d)
			got[d.CallID] = d.Status
		}
	}
	want := map[string]string{"c1": "ok", "c2": "skipped", "c3": "unknown_tool"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statuses in the events (-want +got):\n%s", diff)
	}

	resp, data = f.do("POST", "/v1/sessions/strict/turns", map[string]any{"reply": "openai-pure", "message": body["message"]})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "reply") {
		t.Errorf("an unknown reply option: %d %s, want 400 naming reply", resp.StatusCode, data)
	}
}

// TestClientResultAnswersWithTheMessage: client_result answers with the
// tool message it committed, in the shape the body asks for.
func TestClientResultAnswersWithTheMessage(t *testing.T) {
	schema := openAIToolMessageSchema(t)
	r := &dispatcherReplies{}
	f := newFixture(t, fixtureOpts{replies: r})
	r.d = f.disp
	body := turn("r1", "all", call(t, "l1", "lookup", map[string]any{"q": "x"}), call(t, "l2", "lookup", map[string]any{"q": "y"}))
	body["client_tools"] = []any{map[string]any{"type": "function", "function": map[string]any{"name": "lookup", "description": "Look up.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}}}}
	if got := statuses(f.postTurn("cr", body).Messages); !cmp.Equal(got, []string{"client_pending", "client_pending"}) {
		t.Fatalf("statuses %v, want client_pending twice", got)
	}

	resp, data := f.do("POST", "/v1/sessions/cr/client_result/l1", map[string]any{"content": "found it", "is_error": false})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("client_result: %d %s", resp.StatusCode, data)
	}
	var full struct {
		Status  string      `json:"status"`
		Message toolMessage `json:"message"`
	}
	mustUnmarshal(t, data, &full)
	want := toolMessage{Role: "tool", ToolCallID: "l1", Name: "lookup", Status: "ok", Content: "found it"}
	if full.Status != ackAccepted || !cmp.Equal(full.Message, want) {
		t.Errorf("client_result answered %s, want accepted with %+v", data, want)
	}

	resp, data = f.do("POST", "/v1/sessions/cr/client_result/l2", map[string]any{"content": "no such word", "is_error": true, "reply": "openai-strict"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("client_result: %d %s", resp.StatusCode, data)
	}
	var strict struct {
		Message map[string]any `json:"message"`
	}
	mustUnmarshal(t, data, &strict)
	if err := schema.Validate(strict.Message); err != nil || strict.Message["content"] != "no such word" {
		t.Errorf("strict client_result message %v: %v", strict.Message, err)
	}
}

// anthropicUser is a user message of tool_result blocks.
type anthropicUser struct {
	Role    string `json:"role"`
	Content []struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
		Content   string `json:"content"`
		IsError   bool   `json:"is_error"`
	} `json:"content"`
}

// TestAnthropicTurnRoundTrip: an assistant message in the Anthropic
// Messages shape runs and is answered with a user message of tool_result
// blocks (is_error on failures); client tools may be declared in
// Anthropic's shape, and their client_result answers with the block.
func TestAnthropicTurnRoundTrip(t *testing.T) {
	r := &dispatcherReplies{}
	f := newFixture(t, fixtureOpts{replies: r})
	r.d = f.disp
	body := map[string]any{
		"run": "r1", "provider": toolkit.ProviderClaudeCode, "auto_load_schemas": true,
		"client_tools": []any{map[string]any{"name": "lookup", "description": "Look up.",
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}}},
		"message": json.RawMessage(`{"id":"msg_1","type":"message","role":"assistant","model":"claude","stop_reason":"tool_use","content":[` +
			`{"type":"text","text":"Let me look."},` +
			`{"type":"tool_use","id":"toolu_1","name":"read_files","input":{"paths":["notes.md"]}},` +
			`{"type":"tool_use","id":"toolu_2","name":"read_files","input":{"paths":["notes.md"],"paths":["data.csv"]}},` +
			`{"type":"tool_use","id":"toolu_3","name":"lookup","input":{"q":"x"}}]}`),
	}
	resp, data := f.do("POST", "/v1/sessions/an/turns", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST turn: %d %s", resp.StatusCode, data)
	}
	var reply struct {
		Turn     int64           `json:"turn"`
		Messages []anthropicUser `json:"messages"`
	}
	mustUnmarshal(t, data, &reply)
	if len(reply.Messages) != 1 || reply.Messages[0].Role != "user" || len(reply.Messages[0].Content) != 3 {
		t.Fatalf("reply %s, want one user message with three tool_result blocks", data)
	}
	var got []string
	for _, b := range reply.Messages[0].Content {
		got = append(got, b.Type+":"+b.ToolUseID+":"+map[bool]string{true: "error", false: "ok"}[b.IsError])
	}
	want := []string{"tool_result:toolu_1:ok", "tool_result:toolu_2:error", "tool_result:toolu_3:ok"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool results (-want +got):\n%s", diff)
	}
	if c := reply.Messages[0].Content; !strings.Contains(c[0].Content, "42") || !strings.Contains(c[1].Content, "duplicate") {
		t.Errorf("contents %q, %q: want the file and the refused duplicate key", c[0].Content, c[1].Content)
	}

	resp, data = f.do("POST", "/v1/sessions/an/client_result/toolu_3", map[string]any{"content": "a word", "format": "anthropic"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("client_result: %d %s", resp.StatusCode, data)
	}
	var cr struct {
		Status  string          `json:"status"`
		Message json.RawMessage `json:"message"`
	}
	mustUnmarshal(t, data, &cr)
	if want := `{"type":"tool_result","tool_use_id":"toolu_3","content":"a word"}`; string(cr.Message) != want {
		t.Errorf("client_result message %s, want %s", cr.Message, want)
	}

	// The session reads back with the calls and their statuses.
	resp, data = f.do("GET", "/v1/sessions/an", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET session: %d %s", resp.StatusCode, data)
	}
	var sess struct {
		Tools []toolMessage `json:"tools"`
	}
	mustUnmarshal(t, data, &sess)
	if diff := cmp.Diff([]string{"ok", "invalid_args", "ok"}, statuses(sess.Tools)); diff != "" {
		t.Errorf("persisted statuses (-want +got):\n%s", diff)
	}

	// An explicit format that does not fit is refused.
	body["format"] = "openai-ish"
	resp, data = f.do("POST", "/v1/sessions/an/turns", body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "format") {
		t.Errorf("an unknown format: %d %s, want 400 naming format", resp.StatusCode, data)
	}
}

// TestResponsesAndGeminiAttacks: what a model or caller may try against
// the Responses and Gemini parsers of POST …/turns. Ids that collide with
// the ones made up, repeated ids, arguments that are not an object, a
// functionCall nested in arguments: every call gets exactly one reply,
// paired by id, and a bad call fails alone. A free-text custom tool call
// and an array past the item limit refuse the turn, and nothing runs.
func TestResponsesAndGeminiAttacks(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	post := func(session, message string) (int, []map[string]any, string) {
		t.Helper()
		body := map[string]any{"run": "r", "provider": toolkit.ProviderClaudeCode, "auto_load_schemas": true, "message": json.RawMessage(message)}
		resp, data := f.do("POST", "/v1/sessions/"+session+"/turns", body)
		var reply struct {
			Messages []map[string]any `json:"messages"`
		}
		if resp.StatusCode == http.StatusOK {
			mustUnmarshal(t, data, &reply)
		}
		return resp.StatusCode, reply.Messages, string(data)
	}
	calc := func(id, args string) string {
		return `{"type":"function_call",` + id + `"name":"calculate","arguments":` + args + `}`
	}

	// Responses: a missing call_id next to one that names the id it would
	// be given, a repeated call_id, arguments that are not an object.
	code, ms, data := post("attack-responses", `[`+calc(``, `"{\"expression\":\"1\"}"`)+`,`+calc(`"call_1":"x",`, `"{}"`)+`,`+
		calc(`"call_id":"call_1",`, `"{\"expression\":\"2\"}"`)+`,`+calc(`"call_id":"dup",`, `"{\"expression\":\"3\"}"`)+`,`+
		calc(`"call_id":"dup",`, `"{\"expression\":\"4\"}"`)+`,`+calc(`"call_id":"s",`, `"\"a string\""`)+`,`+
		calc(`"call_id":"n",`, `5`)+`,`+calc(`"call_id":"a",`, `[1]`)+`]`)
	if code != http.StatusOK {
		t.Fatalf("Responses turn: %d %s", code, data)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m["call_id"].(string)+":"+m["tooldispatch"].(map[string]any)["status"].(string))
	}
	want := []string{"call_1_2:ok", "call_2:invalid_args", "call_1:ok", "dup:ok", "dup:invalid_args", "s:invalid_args", "n:invalid_args", "a:invalid_args"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Responses replies (-want +got):\n%s", diff)
	}

	// Gemini: no ids, an id equal to a made-up one, args of every wrong
	// kind, a functionCall nested in args and in a functionResponse.
	code, ms, data = post("attack-gemini", `{"role":"model","parts":[`+
		`{"functionCall":{"name":"calculate","args":{"expression":"1+1","functionCall":{"name":"run_command","args":{"argv":["touch","pwned"]}}}}},`+
		`{"functionCall":{"id":"call_1","name":"calculate","args":{"expression":"2"}}},`+
		`{"functionCall":{"name":"calculate","args":"{\"expression\":\"3\"}"}},`+
		`{"functionCall":{"name":"calculate","args":[1]}},`+
		`{"functionCall":{"name":"calculate"}},`+
		`{"functionResponse":{"name":"run_command","response":{},"parts":[{"functionCall":{"name":"run_command","args":{"argv":["touch","pwned"]}}}]}}]}`)
	if code != http.StatusOK || len(ms) != 1 {
		t.Fatalf("Gemini turn: %d %s", code, data)
	}
	got = nil
	for _, p := range ms[0]["parts"].([]any) {
		fr := p.(map[string]any)["functionResponse"].(map[string]any)
		key := "output"
		if _, failed := fr["response"].(map[string]any)["error"]; failed {
			key = "error"
		}
		got = append(got, fr["id"].(string)+":"+fr["name"].(string)+":"+key)
	}
	// The first call's args carry an extra property: calculate refuses it.
	want = []string{"call_1_2:calculate:error", "call_1:calculate:output", "call_3:calculate:error", "call_4:calculate:error", "call_5:calculate:error"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Gemini replies (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "pwned")); err == nil {
		t.Error("a nested functionCall ran")
	}

	// Refused whole, nothing run: a free-text tool, too many items or parts.
	many := func(item string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+",", messages.MaxMessageItems+1), ",") + "]"
	}
	for _, c := range []struct{ name, message, want string }{
		{"custom tool", `[` + calc(`"call_id":"c1",`, `"{\"expression\":\"1\"}"`) + `,{"type":"custom_tool_call","call_id":"c2","name":"shell","input":"touch pwned"}]`, "custom (free-text) tools are not supported"},
		{"too many items", many(`{}`), "more than 65536 output items"},
		{"too many parts", `{"parts":` + many(`{}`) + `}`, "more than 65536 parts"},
	} {
		code, _, data := post("attack-refused", c.message)
		if code != http.StatusBadRequest || !strings.Contains(data, c.want) {
			t.Errorf("%s: %d %s, want 400 saying %q", c.name, code, data, c.want)
		}
	}
	resp, data2 := f.do("GET", "/v1/sessions/attack-refused", nil)
	if resp.StatusCode == http.StatusOK && strings.Contains(string(data2), "tool_call_id") {
		t.Errorf("a refused turn left calls in the session: %s", data2)
	}
}
