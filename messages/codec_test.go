package messages

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
)

func TestConvertAssistant(t *testing.T) {
	tests := []struct {
		name       string
		raw        string
		format     Format
		want       *AssistantMessage
		wantFormat Format
	}{
		{
			name: "OpenAI with provider extras",
			raw: `{"role":"assistant","content":null,"refusal":null,"annotations":[],"audio":null,` +
				`"reasoning_details":[{"type":"reasoning.text","text":"…"}],"tool_calls":[{"id":"c1","type":"function","index":0,"function":{"name":"f","arguments":"{\"a\":1}"}}]}`,
			want:       &AssistantMessage{Role: "assistant", ToolCalls: []*ToolCall{call("c1", "f", `{"a":1}`)}},
			wantFormat: FormatOpenAI,
		},
		{
			name: "Anthropic detected by its tool_use blocks",
			raw: `{"id":"msg_1","type":"message","role":"assistant","stop_reason":"tool_use","usage":{},"content":[` +
				`{"type":"thinking","thinking":"…","signature":"s"},{"type":"text","text":"one"},{"type":"text","text":"two"},` +
				`{"type":"tool_use","id":"toolu_1","name":"f","input":{"b": 1, "a": [2, 3], "b": 4},"cache_control":{"type":"ephemeral"}},` +
				`{"type":"tool_use","id":"toolu_2","name":"g","input":"not an object"},{"type":"tool_use","id":"toolu_3","name":"h"}]}`,
			want: &AssistantMessage{Role: "assistant", Content: "one\ntwo", ToolCalls: []*ToolCall{
				call("toolu_1", "f", `{"b":1,"a":[2,3],"b":4}`), call("toolu_2", "g", `"not an object"`), call("toolu_3", "h", "")}},
			wantFormat: FormatAnthropic,
		},
		{
			name:       "Anthropic named, text only",
			raw:        `{"role":"assistant","content":"done"}`,
			format:     FormatAnthropic,
			want:       &AssistantMessage{Role: "assistant", Content: "done"},
			wantFormat: FormatAnthropic,
		},
		{
			name:       "content parts without tool_use are OpenAI's",
			raw:        `{"role":"assistant","content":[{"type":"text","text":"hi"}]}`,
			want:       &AssistantMessage{Role: "assistant", Content: "hi"},
			wantFormat: FormatOpenAI,
		},
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

func TestConvertAssistantErrors(t *testing.T) {
	many := func(item string, n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
	}
	tests := []struct{ name, raw, format, want string }{
		{"not an object", `"hi"`, "", "message must be an object (an assistant message), not a string"},
		{"an array holds Responses items", `[1]`, "", "message[0] must be an object (a Responses output item), not number"},
		{"wrong type", `{"tool_calls":[{"function":{"name":true}}]}`, "", "message.tool_calls.function.name must be a string, not bool (byte offset 38"},
		{"other role", `{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}`, "", `message.role is "user"`},
		{"anthropic content type", `{"role":"assistant","content":7}`, "anthropic", "message.content must be a string or an array of content blocks, not a number"},
		{"anthropic block field", `{"content":[{"type":"tool_use","name":["f"]}]}`, "anthropic", "message.content[].name must be a string"},
		{"anthropic with tool_calls", `{"tool_calls":[{"id":"c"}],"content":[{"type":"tool_use"}]}`, "anthropic", "tool_calls is the OpenAI shape"},
		{"bad input JSON is caught by the decoder", `{"content":[{"type":"tool_use","input":{"a":}}]}`, "", "invalid character"},
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

func TestToolSpecs(t *testing.T) {
	var tools []ClientTool
	raw := `[{"type":"function","function":{"name":"a","description":"A.","parameters":{"type":"object"},"strict":true}},` +
		`{"name":"b","description":"B.","input_schema":{"type": "object"},"cache_control":{"type":"ephemeral"}},` +
		`{"type":"custom","name":"c","input_schema":{}}]`
	if err := json.Unmarshal([]byte(raw), &tools); err != nil {
		t.Fatal(err)
	}
	got, err := ToolSpecs(tools)
	if err != nil {
		t.Fatal(err)
	}
	want := []*ToolSpec{{Name: "a", Description: "A.", Parameters: `{"type":"object"}`}, {Name: "b", Description: "B.", Parameters: `{"type":"object"}`}, {Name: "c", Parameters: `{}`}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("specs (-want +got):\n%s", diff)
	}
	for _, bad := range []struct{ raw, want string }{
		{`[{"name":"x"}]`, "client_tools[0] has no function"},
		{`[{"name":"x","input_schema":[]}]`, "client_tools[0].input_schema must be a JSON Schema object"},
		{`[{"input_schema":{}}]`, "client_tools[0].name is empty"},
		{`[{"type":"web_search","name":"x","input_schema":{}}]`, `must be "custom" or absent`},
		{`[{"type":"function","name":"x","function":{"name":"y"}}]`, "mixes the shapes"},
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

func TestReplyShapes(t *testing.T) {
	ms := []*ToolMessage{
		{Role: "tool", ToolCallId: "c1", Name: "read_files", Status: "ok", Content: "a < b"},
		{ToolCallId: "c2", Name: "x", Status: "unknown_tool", Content: "no tool x", Injected: "error"},
		{ToolCallId: "c3", Name: "read_files", Status: "deduped", Content: "a < b"},
		{ToolCallId: "c4", Name: "lookup", Status: "client_pending", Content: "pending"},
		{ToolCallId: "c5", Name: "edit_file", Status: "skipped", Content: "not approved"},
	}
	tests := []struct {
		shape Shape
		want  string
	}{
		{ShapeOpenAI, `[{"role":"tool","tool_call_id":"c1","name":"read_files","status":"ok","content":"a < b"},` +
			`{"role":"tool","tool_call_id":"c2","name":"x","status":"unknown_tool","content":"no tool x","injected":"error"},` +
			`{"role":"tool","tool_call_id":"c3","name":"read_files","status":"deduped","content":"a < b"},` +
			`{"role":"tool","tool_call_id":"c4","name":"lookup","status":"client_pending","content":"pending"},` +
			`{"role":"tool","tool_call_id":"c5","name":"edit_file","status":"skipped","content":"not approved"}]`},
		{ShapeOpenAIStrict, `[{"role":"tool","tool_call_id":"c1","content":"a < b"},{"role":"tool","tool_call_id":"c2","content":"no tool x"},` +
			`{"role":"tool","tool_call_id":"c3","content":"a < b"},{"role":"tool","tool_call_id":"c4","content":"pending"},` +
			`{"role":"tool","tool_call_id":"c5","content":"not approved"}]`},
		{ShapeAnthropic, `[{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"a < b"},` +
			`{"type":"tool_result","tool_use_id":"c2","content":"no tool x","is_error":true},` +
			`{"type":"tool_result","tool_use_id":"c3","content":"a < b"},{"type":"tool_result","tool_use_id":"c4","content":"pending"},` +
			`{"type":"tool_result","tool_use_id":"c5","content":"not approved","is_error":true}]}]`},
	}
	for _, tt := range tests {
		t.Run(string(tt.shape), func(t *testing.T) {
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(Reply(ms, tt.shape)); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want+"\n", b.String()); diff != "" {
				t.Errorf("reply (-want +got):\n%s", diff)
			}
		})
	}
	if got, _ := json.Marshal(Reply(nil, ShapeAnthropic)); string(got) != "[]" {
		t.Errorf("no results in Anthropic's shape: %s, want []", got)
	}
}

func TestParseOptions(t *testing.T) {
	for _, s := range []string{"", "openai", "anthropic", "responses", "gemini"} {
		if _, err := ParseFormat(s); err != nil {
			t.Errorf("ParseFormat(%q): %v", s, err)
		}
	}
	if _, err := ParseFormat("vertex"); err == nil {
		t.Error("ParseFormat(vertex) succeeded")
	}
	for s, want := range map[string]Shape{"": ShapeOpenAI, "openai": ShapeOpenAI, "openai-strict": ShapeOpenAIStrict} {
		if got, err := ParseReply(s); err != nil || got != want {
			t.Errorf("ParseReply(%q) = %q, %v, want %q", s, got, err, want)
		}
	}
	if _, err := ParseReply("anthropic"); err == nil {
		t.Error("ParseReply(anthropic) succeeded: the format decides Anthropic replies")
	}
	if got := ReplyShape(FormatAnthropic, ShapeOpenAIStrict); got != ShapeAnthropic {
		t.Errorf("ReplyShape(anthropic, strict) = %q", got)
	}
	if got := ReplyShape("", ShapeOpenAIStrict); got != ShapeOpenAIStrict {
		t.Errorf("ReplyShape(openai, strict) = %q", got)
	}
	for _, c := range []struct {
		f    Format
		r    Shape
		want Shape
	}{
		{FormatResponses, ShapeOpenAI, ShapeResponses}, {FormatResponses, ShapeOpenAIStrict, ShapeResponsesStrict},
		{FormatResponses, "", ShapeResponses}, {FormatGemini, ShapeOpenAIStrict, ShapeGemini}, {FormatGemini, "", ShapeGemini},
	} {
		if got := ReplyShape(c.f, c.r); got != c.want {
			t.Errorf("ReplyShape(%s, %q) = %q, want %q", c.f, c.r, got, c.want)
		}
	}
}
