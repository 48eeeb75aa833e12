package messages

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

func TestNewCall(t *testing.T) {
	for _, tc := range []struct {
		name string
		args any
		want string
	}{
		{"nil", nil, ""},
		{"text", `{"path":"a.go"}`, `{"path":"a.go"}`},
		{"bytes", []byte(`{"n":1}`), `{"n":1}`},
		{"map", map[string]any{"path": "a.go", "n": 2}, `{"n":2,"path":"a.go"}`},
		{"struct", struct {
			City string `json:"city"`
		}{"Oslo"}, `{"city":"Oslo"}`},
		{"unencodable", map[string]any{"f": func() {}}, `"the arguments could not be encoded as JSON"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCall("c1", "read_files", tc.args)
			want := &ToolCall{Id: "c1", Type: "function", Function: &FunctionCall{Name: "read_files", Arguments: tc.want}}
			if !proto.Equal(want, c) {
				t.Fatalf("got %v, want %v", c, want)
			}
		})
	}
	turn := NewTurn(NewCall("a", "x", nil), NewCall("b", "y", nil))
	if turn.Role != "assistant" || len(turn.ToolCalls) != 2 || turn.ToolCalls[1].Id != "b" {
		t.Fatalf("NewTurn: %v", turn)
	}
}

func TestTurnFromOpenAI(t *testing.T) {
	want := &AssistantMessage{Role: "assistant", Content: "Reading.", ToolCalls: []*ToolCall{
		{Id: "call_1", Type: "function", Function: &FunctionCall{Name: "read_files", Arguments: `{"paths":["a.go"]}`}},
		{Id: "call_2", Type: "function", Function: &FunctionCall{Name: "calculate", Arguments: `{"expression":"1+1"}`}},
	}}
	msg := `{"role":"assistant","content":"Reading.","refusal":null,"tool_calls":[
		{"id":"call_1","type":"function","function":{"name":"read_files","arguments":"{\"paths\":[\"a.go\"]}"}},
		{"id":"call_2","function":{"name":"calculate","arguments":{"expression":"1+1"}}}]}`
	for name, in := range map[string]string{
		"message":    msg,
		"completion": `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"finish_reason":"tool_calls","message":` + msg + `}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			got, err := TurnFromOpenAI([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(want, got) {
				t.Fatalf("got %v\nwant %v", got, want)
			}
		})
	}
	for name, tc := range map[string]struct{ in, wantErr string }{
		"not an object": {`[1]`, "not an array"},
		"empty":         {``, "not empty"},
		"bad json":      {`{"role":`, "reading"},
		"user role":     {`{"role":"user","content":"hi"}`, `role is "user"`},
		"no choices":    {`{"choices":[]}`, "no choices[0].message"},
		"bad content":   {`{"role":"assistant","content":5}`, "content must be"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := TurnFromOpenAI([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
