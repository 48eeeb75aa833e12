package messages

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
)

func call(id, name, args string) *ToolCall {
	return &ToolCall{Id: id, Type: "function", Function: &FunctionCall{Name: name, Arguments: args}}
}

func TestConvertResponsesAndGemini(t *testing.T) {
	tests := []struct {
		name       string
		raw        string
		format     Format
		want       *AssistantMessage
		wantFormat Format
	}{
		{
			name: "Responses output items, detected from the array",
			raw: `[{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"…"}],"encrypted_content":"x"},` +
				`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Looking.","annotations":[]},{"type":"refusal","refusal":"no"}]},` +
				`{"type":"function_call","id":"fc_1","call_id":"call_a","name":"read_files","arguments":"{\"paths\": [\"a\"], \"paths\": []}","status":"completed"},` +
				`{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"q"}},` +
				`{"type":"function_call","id":"fc_2","call_id":"call_b","name":"calculate","arguments":{"expression":"1+1"}},` +
				`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"More."}]}]`,
			want: &AssistantMessage{Role: "assistant", Content: "Looking.\nMore.", ToolCalls: []*ToolCall{
				call("call_a", "read_files", `{"paths": ["a"], "paths": []}`), call("call_b", "calculate", `{"expression":"1+1"}`)}},
			wantFormat: FormatResponses,
		},
		{
			name:       "Responses without calls",
			raw:        `[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}]`,
			format:     FormatResponses,
			want:       &AssistantMessage{Role: "assistant", Content: "done"},
			wantFormat: FormatResponses,
		},
		{
			name: "Gemini content, two calls of one tool without ids, detected from parts",
			raw: `{"role":"model","parts":[{"text":"thinking…","thought":true},{"text":"Reading both."},` +
				`{"functionCall":{"name":"read_files","args":{"paths":["a"]}},"thoughtSignature":"c2ln"},` +
				`{"functionCall":{"name":"read_files","args":{"paths":["b"],"paths":["c"]}}},` +
				`{"function_call":{"id":"given","name":"calculate","args":{"expression":"2*3"}}},` +
				`{"functionCall":{"name":"calculate","args":"{\"expression\":\"1\"}"}},{"functionCall":{"name":"f"}}]}`,
			want: &AssistantMessage{Role: "assistant", Content: "Reading both.", ToolCalls: []*ToolCall{
				call("call_1", "read_files", `{"paths":["a"]}`), call("call_2", "read_files", `{"paths":["b"],"paths":["c"]}`),
				call("given", "calculate", `{"expression":"2*3"}`), call("call_4", "calculate", `"{\"expression\":\"1\"}"`),
				call("call_5", "f", "")}},
			wantFormat: FormatGemini,
		},
		{
			name: "Gemini: a functionCall nested in args or in a functionResponse is data",
			raw: `{"parts":[{"functionCall":{"id":"c1","name":"write_todo","args":{"functionCall":{"name":"run_command","args":{}}}}},` +
				`{"functionResponse":{"name":"x","response":{},"parts":[{"functionCall":{"name":"run_command"}}]}}]}`,
			want: &AssistantMessage{Role: "assistant", ToolCalls: []*ToolCall{
				call("c1", "write_todo", `{"functionCall":{"name":"run_command","args":{}}}`)}},
			wantFormat: FormatGemini,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := DecodeAssistant([]byte(tt.raw), "message.")
			if err != nil {
				t.Fatal(err)
			}
			got, f, err := a.Convert(tt.format, "message.")
			if err != nil {
				t.Fatal(err)
			}
			if f != tt.wantFormat {
				t.Errorf("format %q, want %q", f, tt.wantFormat)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConvertResponsesAndGeminiErrors(t *testing.T) {
	many := func(item string, n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
	}
	tests := []struct{ name, raw, format, want string }{
		{"custom tool call", `[{"type":"custom_tool_call","call_id":"c","name":"grammar","input":"free text"}]`, "",
			`message[0] is a custom_tool_call ("grammar"): custom (free-text) tools are not supported`},
		{"item not an object", `[{"type":"function_call"},"x"]`, "", "message[1] must be an object (a Responses output item), not string"},
		{"call_id not a string", `[{"type":"function_call","call_id":5}]`, "", "message[0].call_id must be a string, not number"},
		{"arguments not JSON text", `[{"type":"function_call","arguments":"x"},{"type":"function_call","arguments":1}]`, "responses", ""},
		{"a user message item", `[{"type":"message","role":"user","content":"hi"}]`, "", `message[0].role is "user"`},
		{"too many items", many(`{}`, MaxMessageItems+1), "", fmt.Sprintf("message has more than %d output items", MaxMessageItems)},
		{"responses named, object given", `{"role":"assistant","tool_calls":[]}`, "responses", "message must be an array of Responses output items"},
		{"openai named, array given", `[]`, "openai", "message is an array, the shape of Responses output items"},
		{"gemini user role", `{"role":"user","parts":[{"text":"hi"}]}`, "", `message.role is "user": a turn is the model's content`},
		{"gemini parts not an array", `{"parts":{"functionCall":{}}}`, "", "message.parts must be an array of parts, not an object"},
		{"gemini part not an object", `{"parts":[7]}`, "", "message.parts[0] must be an object (a Gemini part), not number"},
		{"gemini name not a string", `{"parts":[{"functionCall":{"name":7}}]}`, "", "message.parts[0].functionCall.name must be a string, not number"},
		{"gemini both spellings", `{"parts":[{"functionCall":{"name":"a"},"function_call":{"name":"b"}}]}`, "", "has both functionCall and function_call"},
		{"gemini too many parts", `{"parts":` + many(`{}`, MaxMessageItems+1) + `}`, "", fmt.Sprintf("message.parts has more than %d parts", MaxMessageItems)},
		{"gemini named, OpenAI given", `{"tool_calls":[]}`, "gemini", "tool_calls and content are not the Gemini shape"},
		{"parts under another format", `{"parts":[],"content":"x"}`, "", "message.parts is the Gemini shape, not the openai one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := DecodeAssistant([]byte(tt.raw), "message.")
			if err == nil {
				_, _, err = a.Convert(Format(tt.format), "message.")
			}
			if tt.want == "" {
				// Arguments that are not an object are refused per call by
				// the dispatcher, never for the whole message.
				if err != nil {
					t.Errorf("error %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestEveryCallPairsByID: in every format, whatever the ids (missing,
// empty, blank, repeated, equal to an id the codec would make up), every
// call gets an id, made-up ids collide with none of the turn's, and each
// reply carries its call's id, in call order.
func TestEveryCallPairsByID(t *testing.T) {
	ids := []*string{nil, ptr(""), ptr("  "), ptr("call_2"), ptr("x"), ptr("x"), nil, ptr(" call_1 "), ptr("call_7_2")}
	want := []string{"call_1_2", "call_2_2", "call_3", "call_2", "x", "x", "call_7", "call_1", "call_7_2"}
	build := map[Format]func(id *string, i int) string{
		FormatOpenAI: func(id *string, i int) string {
			return fmt.Sprintf(`{%s"type":"function","function":{"name":"f%d","arguments":"{}"}}`, field("id", id), i)
		},
		FormatAnthropic: func(id *string, i int) string {
			return fmt.Sprintf(`{"type":"tool_use",%s"name":"f%d","input":{}}`, field("id", id), i)
		},
		FormatResponses: func(id *string, i int) string {
			return fmt.Sprintf(`{"type":"function_call",%s"name":"f%d","arguments":"{}"}`, field("call_id", id), i)
		},
		FormatGemini: func(id *string, i int) string {
			return fmt.Sprintf(`{"functionCall":{%s"name":"f%d","args":{}}}`, field("id", id), i)
		},
	}
	wrap := map[Format]string{
		FormatOpenAI: `{"role":"assistant","tool_calls":[%s]}`, FormatAnthropic: `{"role":"assistant","content":[%s]}`,
		FormatResponses: `[%s]`, FormatGemini: `{"role":"model","parts":[%s]}`,
	}
	for _, f := range Formats {
		t.Run(string(f), func(t *testing.T) {
			parts := make([]string, len(ids))
			for i, id := range ids {
				parts[i] = build[f](id, i)
			}
			a, err := DecodeAssistant(fmt.Appendf(nil, wrap[f], strings.Join(parts, ",")), "")
			if err != nil {
				t.Fatal(err)
			}
			msg, got, err := a.Convert("", "")
			if err != nil || got != f {
				t.Fatalf("Convert: format %q, %v", got, err)
			}
			var gotIDs []string
			results := make([]*ToolMessage, len(msg.GetToolCalls()))
			for i, c := range msg.GetToolCalls() {
				gotIDs = append(gotIDs, c.GetId())
				results[i] = &ToolMessage{ToolCallId: c.GetId(), Name: "inner", Status: "ok", Content: fmt.Sprint(i)}
			}
			if diff := cmp.Diff(want, gotIDs); diff != "" {
				t.Fatalf("ids (-want +got):\n%s", diff)
			}
			// The reply carries each call's id, in order, once.
			b, err := json.Marshal(ReplyTo(msg, results, ReplyShape(f, "")))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, replyIDs(t, b)); diff != "" {
				t.Errorf("reply ids (-want +got):\n%s\n%s", diff, b)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// field is `"name":"id",` or nothing when id is nil.
func field(name string, id *string) string {
	if id == nil {
		return ""
	}
	return fmt.Sprintf("%q:%q,", name, *id)
}

// replyIDs reads the call ids of a reply in any shape, in order.
func replyIDs(t *testing.T, b []byte) []string {
	t.Helper()
	var msgs []map[string]any
	if err := json.Unmarshal(b, &msgs); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		switch {
		case m["tool_call_id"] != nil:
			out = append(out, m["tool_call_id"].(string))
		case m["call_id"] != nil:
			out = append(out, m["call_id"].(string))
		case m["parts"] != nil:
			for _, p := range m["parts"].([]any) {
				out = append(out, p.(map[string]any)["functionResponse"].(map[string]any)["id"].(string))
			}
		default:
			for _, c := range m["content"].([]any) {
				out = append(out, c.(map[string]any)["tool_use_id"].(string))
			}
		}
	}
	return out
}

func TestReplyShapesResponsesAndGemini(t *testing.T) {
	ms := []*ToolMessage{
		{ToolCallId: "c1", Name: "read_files", Status: "ok", Content: "a < b"},
		{ToolCallId: "c2", Name: "calculate", Status: "invalid_args", Content: "bad", Injected: "error"},
		{ToolCallId: "c3", Name: "lookup", Status: "client_pending", Content: "pending"},
	}
	msg := NewTurn(call("c1", "run_tool", "{}"), call("c2", "calculate", "{}"), call("c3", "lookup", "{}"))
	tests := []struct {
		shape Shape
		want  string
	}{
		{ShapeResponses, `[{"type":"function_call_output","call_id":"c1","output":"a < b","tooldispatch":{"status":"ok"}},` +
			`{"type":"function_call_output","call_id":"c2","output":"bad","tooldispatch":{"status":"invalid_args","injected":"error"}},` +
			`{"type":"function_call_output","call_id":"c3","output":"pending","tooldispatch":{"status":"client_pending"}}]`},
		{ShapeResponsesStrict, `[{"type":"function_call_output","call_id":"c1","output":"a < b"},` +
			`{"type":"function_call_output","call_id":"c2","output":"bad"},{"type":"function_call_output","call_id":"c3","output":"pending"}]`},
		{ShapeGemini, `[{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"run_tool","response":{"output":"a < b"}}},` +
			`{"functionResponse":{"id":"c2","name":"calculate","response":{"error":"bad"}}},` +
			`{"functionResponse":{"id":"c3","name":"lookup","response":{"output":"pending"}}}]}]`},
	}
	for _, tt := range tests {
		t.Run(string(tt.shape), func(t *testing.T) {
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(ReplyTo(msg, ms, tt.shape)); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want+"\n", b.String()); diff != "" {
				t.Errorf("reply (-want +got):\n%s", diff)
			}
		})
	}
	if got, _ := json.Marshal(Reply(nil, ShapeGemini)); string(got) != "[]" {
		t.Errorf("no results in Gemini's shape: %s, want []", got)
	}
	// Without the calls, a Gemini response is named after the result.
	if got := GeminiResult(ms[0], "").FunctionResponse.Name; got != "read_files" {
		t.Errorf("GeminiResult name %q, want read_files", got)
	}
}

func TestToolSpecsResponsesAndGemini(t *testing.T) {
	raw := `[{"type":"function","name":"r","description":"R.","parameters":{"type":"object","properties":{"q":{"type":"string"}}},"strict":true},` +
		`{"name":"g","description":"G.","parameters":{"type":"OBJECT","properties":{"n":{"type":"INTEGER","nullable":true},` +
		`"tags":{"type":"ARRAY","items":{"type":"STRING","enum":["a","b"],"format":"enum"},"maxItems":"3"}},"required":["tags"],"propertyOrdering":["n","tags"]}},` +
		`{"functionDeclarations":[{"name":"j","parametersJsonSchema":{"type":"object","properties":{"x":{"type":["string","null"]}}}},{"name":"none"}]}]`
	var tools []ClientTool
	if err := json.Unmarshal([]byte(raw), &tools); err != nil {
		t.Fatal(err)
	}
	got, err := ToolSpecs(tools)
	if err != nil {
		t.Fatal(err)
	}
	want := []*ToolSpec{
		{Name: "r", Description: "R.", Parameters: `{"type":"object","properties":{"q":{"type":"string"}}}`},
		{Name: "g", Description: "G.", Parameters: `{"properties":{"n":{"type":["integer","null"]},"tags":{"items":{"enum":["a","b"],"type":"string"},"maxItems":3,"type":"array"}},"required":["tags"],"type":"object"}`},
		{Name: "j", Parameters: `{"type":"object","properties":{"x":{"type":["string","null"]}}}`},
		{Name: "none"},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("specs (-want +got):\n%s", diff)
	}
	for _, bad := range []struct{ raw, want string }{
		{`[{"name":"g","parameters":{"type":"OBJECT"},"parametersJsonSchema":{}}]`, "has both parameters and parametersJsonSchema"},
		{`[{"name":"g","parameters":{"type":"ARRAY","maxItems":"many"}}]`, `client_tools[0].parameters: maxItems must be an integer, not "many"`},
		{`[{"functionDeclarations":[{"parameters":{"type":"OBJECT"}}]}]`, "client_tools[0].functionDeclarations[0].name is empty"},
		{`[{"name":"x","functionDeclarations":[]}]`, "a Gemini Tool holds only functionDeclarations"},
		{`[{"type":"function","name":"r","parameters":"x"}]`, "client_tools[0].parameters must be a JSON Schema object"},
	} {
		var ts []ClientTool
		if err := json.Unmarshal([]byte(bad.raw), &ts); err != nil {
			t.Fatal(err)
		}
		if _, err := ToolSpecs(ts); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ToolSpecs(%s) = %v, want an error containing %q", bad.raw, err, bad.want)
		}
	}
}
