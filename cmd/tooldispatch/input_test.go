package main

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/messages"
)

// defaultTurnLimit is what run reads of one turn under the default turn
// limit.
var defaultTurnLimit = actors.EncodedTurnLimit(actors.DefaultMaxTurnBytes)

// readAll reads every turn of input; err is the error that ended it (nil at
// the end of the input).
func readAll(t *testing.T, input string, maxBytes int64) ([]*inputTurn, error) {
	t.Helper()
	tr := newTurnReader(strings.NewReader(input), maxBytes)
	var out []*inputTurn
	for i := 0; i <= len(input)+1; i++ {
		turn, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			if _, again := tr.Next(); again != err {
				t.Errorf("Next after an error returned %v, want the same error %v", again, err)
			}
			return out, err
		}
		out = append(out, turn)
	}
	t.Fatalf("more turns than bytes in %q", input)
	return nil, nil
}

func call(id, name, args string) *messages.ToolCall {
	return &messages.ToolCall{Id: id, Type: "function", Function: &messages.FunctionCall{Name: name, Arguments: args}}
}

func assistant(content string, calls ...*messages.ToolCall) *messages.AssistantMessage {
	return &messages.AssistantMessage{Role: "assistant", Content: content, ToolCalls: calls}
}

const (
	msgA = `{"role":"assistant","content":"a","tool_calls":[{"id":"c1","type":"function","function":{"name":"read_files","arguments":"{\"paths\":[\"x\"]}"}}]}`
	msgB = `{"role":"assistant","tool_calls":[{"id":"c2","function":{"name":"calculate","arguments":"{}"}}]}`
)

var (
	turnA = assistant("a", call("c1", "read_files", `{"paths":["x"]}`))
	turnB = assistant("", call("c2", "calculate", `{}`))
)

func TestReadTurns(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []*inputTurn
	}{
		{name: "empty", input: "", want: nil},
		{name: "only whitespace", input: " \n\t\r\n", want: nil},
		{name: "empty array", input: " [ ] ", want: nil},
		{name: "single value", input: msgA, want: []*inputTurn{{Index: 1, Offset: 0, Message: turnA}}},
		{
			name:  "array",
			input: "[" + msgA + " ,\n " + msgB + "]",
			want: []*inputTurn{
				{Index: 1, Offset: 1, Message: turnA},
				{Index: 2, Offset: int64(len(msgA)) + 5, Message: turnB},
			},
		},
		{
			name:  "JSON Lines with blank lines",
			input: msgA + "\n\n" + msgB + "\r\n" + msgA + "\n",
			want: []*inputTurn{
				{Index: 1, Offset: 0, Message: turnA},
				{Index: 2, Offset: int64(len(msgA)) + 2, Message: turnB},
				{Index: 3, Offset: int64(len(msgA)+len(msgB)) + 4, Message: turnA},
			},
		},
		{
			name:  "values back to back, arrays and objects mixed",
			input: msgA + "[" + msgB + "]" + msgA,
			want: []*inputTurn{
				{Index: 1, Offset: 0, Message: turnA},
				{Index: 2, Offset: int64(len(msgA)) + 1, Message: turnB},
				{Index: 3, Offset: int64(len(msgA)+len(msgB)) + 2, Message: turnA},
			},
		},
		{
			name:  "byte-order mark",
			input: "\xEF\xBB\xBF" + msgB,
			want:  []*inputTurn{{Index: 1, Offset: 3, Message: turnB}},
		},
		{
			name: "envelope",
			input: `{"session":"s1","run":"r1","provider":"claude-code","turn_id":"t1","approve":"all",` +
				`"exclude":["run_command"],"auto_load_schemas":true,` +
				`"client_tools":[{"type":"function","function":{"name":"lookup","description":"Look up.","parameters":{"type":"object", "properties":{}}}}],` +
				`"message":` + msgB + `}`,
			want: []*inputTurn{{
				Index: 1, Offset: 0, Session: "s1", Run: "r1", Provider: "claude-code", TurnID: "t1", Approve: "all",
				Exclude: []string{"run_command"}, HasExclude: true, AutoLoadSchemas: true, HasAutoLoadSchemas: true,
				ClientTools:    []*messages.ToolSpec{{Name: "lookup", Description: "Look up.", Parameters: `{"type":"object","properties":{}}`}},
				HasClientTools: true,
				Message:        turnB,
			}},
		},
		{
			name:  "envelope with empty declarations",
			input: `{"client_tools":[],"exclude":[],"message":{"tool_calls":[]}}`,
			want: []*inputTurn{{Index: 1, Offset: 0, HasClientTools: true, ClientTools: []*messages.ToolSpec{},
				HasExclude: true, Exclude: []string{}, Message: assistant("")}},
		},
		{
			name:  "arguments as an object keep their order and duplicates",
			input: `{"tool_calls":[{"id":"c","function":{"name":"f","arguments":{"b": 1, "a": [2, 3], "b": 4}}}]}`,
			want:  []*inputTurn{{Index: 1, Message: assistant("", call("c", "f", `{"b":1,"a":[2,3],"b":4}`))}},
		},
		{
			name:  "arguments null, absent, or another JSON value",
			input: `{"tool_calls":[{"id":"a","function":{"name":"f","arguments":null}},{"id":"b","function":{"name":"f"}},{"id":"c","function":{"name":"f","arguments":[1, 2]}},{"id":"d"}]}`,
			want: []*inputTurn{{Index: 1, Message: assistant("",
				call("a", "f", ""), call("b", "f", ""), call("c", "f", "[1,2]"), call("d", "", ""))}},
		},
		{
			name:  "content parts and a null content",
			input: `{"role":"assistant","content":[{"type":"text","text":"one"},{"type":"image_url"},{"type":"text","text":"two"}]}` + `{"role":"assistant","content":null}`,
			want: []*inputTurn{
				{Index: 1, Message: assistant("one\ntwo")},
				{Index: 2, Offset: 111, Message: assistant("")},
			},
		},
		{
			name: "Anthropic message, detected and named",
			input: `{"role":"assistant","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t1","name":"f","input":{"b":1,"b":2}}]}` +
				`{"format":"anthropic","message":{"role":"assistant","content":"no calls"}}`,
			want: []*inputTurn{
				{Index: 1, Format: messages.FormatAnthropic, Message: assistant("hi", call("t1", "f", `{"b":1,"b":2}`))},
				{Index: 2, Offset: 123, Format: messages.FormatAnthropic, Message: assistant("no calls")},
			},
		},
		{
			name:  "unknown message fields are ignored",
			input: `{"role":"assistant","refusal":null,"reasoning_content":"…","tool_calls":[{"id":"c","type":"function","index":0,"function":{"name":"f","arguments":""}}]}`,
			want:  []*inputTurn{{Index: 1, Message: assistant("", call("c", "f", ""))}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(t, tt.input, defaultTurnLimit)
			if err != nil {
				t.Fatalf("reading: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("turns (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadTurnsErrors(t *testing.T) {
	tests := []struct {
		name      string
		input     string
		maxBytes  int64
		wantTurns int // turns read before the error
		turn      int
		offset    int64
		text      string
	}{
		{name: "invalid JSON", input: `{"role":"assistant" "x"}`, turn: 1, offset: 20, text: "invalid JSON"},
		{name: "not an object", input: msgA + "\n42\n", wantTurns: 1, turn: 2, offset: int64(len(msgA)) + 1, text: "not a number"},
		{name: "a string", input: `"hello"`, turn: 1, offset: 0, text: "not a string"},
		{name: "null", input: ` null`, turn: 1, offset: 1, text: "not null"},
		{name: "bad literal", input: `tru`, turn: 1, offset: 2, text: "invalid JSON"},
		{name: "neither shape", input: msgA + msgB + `{"content":"hi"}`, wantTurns: 2, turn: 3, offset: int64(len(msgA) + len(msgB)), text: "an assistant message (with role and tool_calls), a Gemini content (with parts) or an envelope (with message)"},
		{name: "other role", input: `{"role":"user","content":"hi"}`, turn: 1, text: `role is "user"`},
		{name: "wrong field type", input: msgB + "\n" + `{"role":"assistant","tool_calls":[{"id":5}]}`, wantTurns: 1, turn: 2, offset: int64(len(msgB)) + 41, text: "tool_calls.id must be a string, not number"},
		{name: "tool_calls not an array", input: `{"role":"assistant","tool_calls":{}}`, turn: 1, offset: 33, text: "tool_calls must be an array, not object"},
		{name: "content of the wrong type", input: `{"role":"assistant","content":7}`, turn: 1, text: "content must be a string, null or an array of content parts"},
		{name: "unknown envelope field", input: `{"sesion":"x","message":{"tool_calls":[]}}`, turn: 1, text: `unknown envelope field "sesion"`},
		{name: "envelope field of the wrong type", input: `{"session":1,"message":{"tool_calls":[]}}`, turn: 1, offset: 11, text: "session must be a string, not number"},
		{name: "nested message type", input: `{"message":{"tool_calls":[{"function":{"name":true}}]}}`, turn: 1, offset: 49, text: "message.tool_calls.function.name must be a string, not bool"},
		{name: "envelope message null", input: `{"message":null}`, turn: 1, text: "message is null"},
		{name: "envelope format", input: `{"format":"vertex","message":{"tool_calls":[]}}`, turn: 1, text: `format must be "openai", "anthropic", "responses" or "gemini", not "vertex"`},
		{name: "format that does not fit the message", input: `{"format":"gemini","message":{"tool_calls":[]}}`, turn: 1, text: "message.tool_calls and content are not the Gemini shape"},
		{name: "responses custom tool", input: `{"message":[{"type":"reasoning"},{"type":"custom_tool_call","name":"g","input":"rm -rf /"}]}`, turn: 1, text: `message[1] is a custom_tool_call ("g"): custom (free-text) tools are not supported`},
		{name: "responses item field", input: `{"message":[{"type":"function_call","call_id":["x"]}]}`, turn: 1, text: "message[0].call_id must be a string, not array"},
		{name: "responses envelope field of the wrong type", input: `{"session":1,"message":[]}`, turn: 1, offset: 11, text: "session must be a string, not number"},
		{name: "gemini part field", input: `{"role":"model","parts":[{"functionCall":{"args":{},"id":7}}]}`, turn: 1, text: "parts[0].functionCall.id must be a string, not number"},
		{name: "anthropic block of the wrong type", input: `{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"a":1}},{"type":"tool_use","id":5}]}`, turn: 1, text: "content[].id must be a string"},
		{name: "envelope approve", input: `{"approve":"yes","message":{"tool_calls":[]}}`, turn: 1, text: `approve must be "ask", "all" or "none", not "yes"`},
		{name: "envelope id too long", input: `{"run":"` + strings.Repeat("r", 300) + `","message":{"tool_calls":[]}}`, turn: 1, text: "run is longer than 256 bytes"},
		{name: "client tool shape", input: `{"client_tools":[{"name":"x"}],"message":{"tool_calls":[]}}`, turn: 1, text: "client_tools[0] has no function"},
		{name: "client tool type", input: `{"client_tools":[{"type":"web","function":{"name":"x"}}],"message":{"tool_calls":[]}}`, turn: 1, text: `client_tools[0].type must be "function"`},
		{name: "client tool parameters", input: `{"client_tools":[{"function":{"name":"x","parameters":[]}}],"message":{"tool_calls":[]}}`, turn: 1, text: "must be a JSON Schema object"},
		{name: "missing comma in array", input: "[" + msgA + " " + msgB + "]", wantTurns: 1, turn: 2, offset: int64(len(msgA)) + 2, text: "expected ',' or ']' after a turn"},
		{name: "trailing comma", input: "[" + msgA + ",]", wantTurns: 1, turn: 2, offset: int64(len(msgA)) + 2, text: "expected a turn after ','"},
		{name: "unclosed array", input: "[" + msgA + "\n", wantTurns: 1, turn: 2, offset: int64(len(msgA)) + 2, text: "array of turns is not closed"},
		{name: "truncated value", input: msgA + "\n" + `{"role":"assist`, wantTurns: 1, turn: 2, offset: int64(len(msgA)) + 16, text: "unexpected end of input inside the turn"},
		{name: "mismatched bracket", input: `{"tool_calls":[}`, turn: 1, offset: 15, text: "invalid character '}': expected ']'"},
		{name: "stray closer", input: msgB + "]", wantTurns: 1, turn: 2, offset: int64(len(msgB)), text: "invalid character ']' where a turn should begin"},
		{name: "nested array", input: "[[" + msgB + "]]", turn: 1, offset: 1, text: "not an array"},
		{name: "too big", input: msgB + msgA, maxBytes: int64(len(msgB)), wantTurns: 1, turn: 2, offset: int64(len(msgB)), text: "larger than"},
		{name: "brackets inside strings do not count", input: `{"content":"}]{[\"", "role":"assistant"` + "\n", turn: 1, offset: 40, text: "unexpected end of input inside the turn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			maxBytes := tt.maxBytes
			if maxBytes == 0 {
				maxBytes = defaultTurnLimit
			}
			got, err := readAll(t, tt.input, maxBytes)
			if len(got) != tt.wantTurns {
				t.Errorf("read %d turns before the error, want %d", len(got), tt.wantTurns)
			}
			var ie *inputError
			if !errors.As(err, &ie) {
				t.Fatalf("error = %v, want an *inputError", err)
			}
			if ie.Turn != tt.turn || ie.Offset != tt.offset {
				t.Errorf("error at turn %d byte %d, want turn %d byte %d (%v)", ie.Turn, ie.Offset, tt.turn, tt.offset, err)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("error %q does not contain %q", err, tt.text)
			}
		})
	}
}

// errReader returns some bytes, then an error.
type errReader struct {
	data string
	err  error
}

func (r *errReader) Read(p []byte) (int, error) {
	if r.data == "" {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestReadTurnsReadError(t *testing.T) {
	boom := errors.New("boom")
	tr := newTurnReader(&errReader{data: msgB + "\n" + `{"role"`, err: boom}, defaultTurnLimit)
	if _, err := tr.Next(); err != nil {
		t.Fatalf("first turn: %v", err)
	}
	_, err := tr.Next()
	var ie *inputError
	if !errors.As(err, &ie) || !errors.Is(err, boom) || ie.Turn != 2 {
		t.Fatalf("error = %v, want turn 2 wrapping the read error", err)
	}
}

func FuzzReadTurns(f *testing.F) {
	for _, s := range []string{
		msgA, msgB, "[" + msgA + "," + msgB + "]", msgA + "\n" + msgB + "\n",
		`{"session":"s","client_tools":[{"type":"function","function":{"name":"x","parameters":{}}}],"message":` + msgB + `}`,
		`{"tool_calls":[{"id":"c","function":{"name":"f","arguments":{"a":[1,{"b":"}"}]}}}]}`,
		`[`, `]`, `{"a":"\"`, `[{},]`, `nul`, "\xEF\xBB\xBF[]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := newTurnReader(strings.NewReader(string(data)), 1<<16)
		last := int64(-1)
		for i := 0; ; i++ {
			if i > len(data)+1 {
				t.Fatalf("more turns than bytes")
			}
			turn, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				var ie *inputError
				if !errors.As(err, &ie) {
					t.Fatalf("error %v is not an *inputError", err)
				}
				if ie.Turn != i+1 || ie.Offset < 0 || ie.Offset > int64(len(data)) {
					t.Fatalf("error %v: turn %d, offset %d, after %d turns of %d bytes", err, ie.Turn, ie.Offset, i, len(data))
				}
				if _, again := tr.Next(); again != err {
					t.Fatalf("the error is not sticky: %v then %v", err, again)
				}
				return
			}
			if turn.Message == nil || turn.Index != i+1 || turn.Offset <= last || turn.Offset >= int64(len(data)) {
				t.Fatalf("turn %+v after offset %d", turn, last)
			}
			for _, c := range turn.Message.ToolCalls {
				if c.Function == nil {
					t.Fatalf("call %v has no function", c)
				}
			}
			last = turn.Offset
		}
	})
}
