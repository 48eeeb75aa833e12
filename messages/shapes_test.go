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
