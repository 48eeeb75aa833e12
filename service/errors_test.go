package service

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/actors"
)

// TestRequestErrors: bad requests get the right code and a JSON error
// that says what was wrong (and where, for JSON).
func TestRequestErrors(t *testing.T) {
	f := newFixture(t, fixtureOpts{maxBody: 4096})
	okTurn := `{"message":{"role":"assistant","tool_calls":[]}}`
	tests := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        string
		wantCode    int
		wantInError []string
	}{
		{"syntax error", "POST", "/v1/sessions/e1/turns", "application/json", `{"message": {"role": "assistant",,}}`, 400, []string{"byte offset 33"}},
		{"truncated", "POST", "/v1/sessions/e1/turns", "application/json", `{"message": {"role"`, 400, []string{"byte offset 19", "ends inside"}},
		{"unknown field", "POST", "/v1/sessions/e1/turns", "application/json", `{"message":{"role":"assistant"},"bogus":1}`, 400, []string{`unknown field "bogus"`, "byte offset"}},
		{"unknown nested field", "POST", "/v1/sessions/e1/turns", "application/json", `{"message":{"role":"assistant"},"client_tools":[{"type":"function","function":{"name":"x"},"extra":1}]}`, 400, []string{`unknown field "extra"`}},
		{"message not an object", "POST", "/v1/sessions/e1/turns", "application/json", `{"message":"hi"}`, 400, []string{"message must be an object"}},
		{"message field of the wrong type", "POST", "/v1/sessions/e1/turns", "application/json", `{"message":{"tool_calls":[{"id":5}]}}`, 400, []string{"message.tool_calls.id must be a string", "byte offset"}},
		{"bad format", "POST", "/v1/sessions/e1/turns", "application/json", `{"format":"vertex","message":{}}`, 400, []string{`format must be "openai", "anthropic", "responses" or "gemini"`}},
		{"responses custom tool", "POST", "/v1/sessions/e1/turns", "application/json", `{"message":[{"type":"custom_tool_call","call_id":"c","name":"g","input":"x"}]}`, 400, []string{"message[0] is a custom_tool_call", "not supported"}},
		{"gemini args", "POST", "/v1/sessions/e1/turns", "application/json", `{"message":{"parts":[{"functionCall":{"name":5}}]}}`, 400, []string{"message.parts[0].functionCall.name must be a string"}},
		{"bad tools format", "POST", "/v1/sessions/e1/turns", "application/json", `{"tools_format":"vertex","message":{"tool_calls":[]}}`, 400, []string{"tools_format: tools format must be one of"}},
		{"bad tools format query", "GET", "/v1/tools?format=vertex", "", "", 400, []string{"tools format must be one of openai, openai-strict, responses, anthropic, gemini"}},
		{"anthropic with tool_calls", "POST", "/v1/sessions/e1/turns", "application/json", `{"format":"anthropic","message":{"tool_calls":[{"id":"c1"}]}}`, 400, []string{"tool_use blocks"}},
		{"anthropic content", "POST", "/v1/sessions/e1/turns", "application/json", `{"format":"anthropic","message":{"role":"assistant","content":[{"type":"tool_use","id":7}]}}`, 400, []string{"message.content[].id must be a string"}},
		{"wrong type", "POST", "/v1/sessions/e1/turns", "application/json", `{"message":{"tool_calls":5}}`, 400, []string{"message.tool_calls", "an array", "byte offset"}},
		{"not an object", "POST", "/v1/sessions/e1/turns", "application/json", `[1]`, 400, []string{"JSON object"}},
		{"empty body", "POST", "/v1/sessions/e1/turns", "application/json", ``, 400, []string{"empty"}},
		{"trailing data", "POST", "/v1/sessions/e1/turns", "application/json", okTurn + `{}`, 400, []string{"after the JSON object"}},
		{"no message", "POST", "/v1/sessions/e1/turns", "application/json", `{"run":"r1"}`, 400, []string{"message is required"}},
		{"bad approve", "POST", "/v1/sessions/e1/turns", "application/json", `{"approve":"maybe","message":{}}`, 400, []string{"approve"}},
		{"bad client tool", "POST", "/v1/sessions/e1/turns", "application/json", `{"message":{},"client_tools":[{"type":"function","function":{"name":"find_tools"}}]}`, 400, []string{"client_tools", "built-in tool in the tools array"}},
		{"bad chaos policy", "POST", "/v1/sessions/e1/turns", "application/json", `{"message":{},"chaos":{"seed":1,"rules":[{"tools":["*"],"faults":[{"kind":"melt","probability":0.5}]}]}}`, 400, []string{"chaos policy", "melt"}},
		{"oversize body", "POST", "/v1/sessions/e1/turns", "application/json", `{"message":{"content":"` + strings.Repeat("x", 5000) + `"}}`, 413, []string{"larger than 4096 bytes"}},
		{"text/plain", "POST", "/v1/sessions/e1/turns", "text/plain", okTurn, 415, []string{"application/json"}},
		{"curl -d without a content type", "POST", "/v1/sessions/e1/confirm/c1", "application/x-www-form-urlencoded", `{"approve":true,"args_hash":"h"}`, 415,
			[]string{"Content-Type: application/json", `curl: -H 'Content-Type: application/json'`}},
		{"confirm without args_hash", "POST", "/v1/sessions/e1/confirm/c1", "application/json", `{"approve":true}`, 400, []string{`"args_hash" is required`, "tool_confirm"}},
		{"confirm without approve", "POST", "/v1/sessions/e1/confirm/c1", "application/json", `{}`, 400, []string{`"approve" is required`}},
		{"unknown session", "GET", "/v1/sessions/nobody", "", "", 404, []string{`session "nobody" has no committed turns`}},
		{"unknown route", "GET", "/v2/nothing", "", "", 404, []string{"no such endpoint"}},
		{"wrong method", "PUT", "/v1/sessions/e1/turns", "application/json", okTurn, 405, []string{"not allowed", "POST"}},
		{"answer without replies", "POST", "/v1/sessions/e1/answer/c1", "application/json", `{"text":"yes"}`, 404, []string{"no pending question or client call with that id"}},
		{"client result without replies", "POST", "/v1/sessions/e1/client_result/c1", "application/json", `{"content":"x"}`, 404, []string{"no pending question or client call with that id"}},
		{"long session id", "POST", "/v1/sessions/" + strings.Repeat("s", 300) + "/turns", "application/json", okTurn, 400, []string{"longer than 256"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h http.Header
			if tt.contentType != "" {
				h = http.Header{"Content-Type": {tt.contentType}}
			}
			var body any
			if tt.body != "" {
				body = tt.body
			}
			resp, data := f.request(t.Context(), tt.method, tt.path, body, h)
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("%d %s, want %d", resp.StatusCode, data, tt.wantCode)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
			var e errorBody
			mustUnmarshal(t, data, &e)
			for _, want := range tt.wantInError {
				if !strings.Contains(e.Error, want) {
					t.Errorf("error %q does not contain %q", e.Error, want)
				}
			}
			if tt.wantCode == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}

	// A body without any Content-Type (request always sets one).
	req, err := http.NewRequestWithContext(t.Context(), "POST", f.url+"/v1/sessions/e1/turns", strings.NewReader(okTurn))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("no Content-Type: %d, want 415", resp.StatusCode)
	}
}

// fakeReplies answers like a Replies with one pending question "q1" that
// can be answered once.
type fakeReplies struct{ answered chan string }

func (r *fakeReplies) Answer(_ context.Context, session, callID, text string) error {
	if session != "s" || callID != "q1" {
		return actors.ErrNoPending
	}
	select {
	case r.answered <- text:
		return nil
	default:
		return actors.ErrAlreadyAnswered
	}
}

func (r *fakeReplies) ClientResult(_ context.Context, _, callID, _ string, _ bool) error {
	if callID == "broken" {
		return errors.New("the pipe to the client broke")
	}
	return actors.ErrNoPending
}

// TestReplies: answers go to Options.Replies, and its errors map to codes.
func TestReplies(t *testing.T) {
	r := &fakeReplies{answered: make(chan string, 1)}
	f := newFixture(t, fixtureOpts{replies: r})
	tests := []struct {
		name, path string
		body       any
		want       int
	}{
		{"answer", "/v1/sessions/s/answer/q1", map[string]any{"text": "blue"}, 200},
		{"answer again", "/v1/sessions/s/answer/q1", map[string]any{"text": "red"}, 409},
		{"unknown question", "/v1/sessions/s/answer/q2", map[string]any{"text": "x"}, 404},
		{"answer without text", "/v1/sessions/s/answer/q1", map[string]any{}, 400},
		{"unknown client call", "/v1/sessions/s/client_result/c9", map[string]any{"content": "x"}, 404},
		{"failing sink", "/v1/sessions/s/client_result/broken", map[string]any{"content": "x", "is_error": true}, 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := f.do("POST", tt.path, tt.body)
			if resp.StatusCode != tt.want {
				t.Errorf("%d %s, want %d", resp.StatusCode, body, tt.want)
			}
			if strings.Contains(string(body), "pipe") {
				t.Errorf("the internal error leaked: %s", body)
			}
		})
	}
	if got := <-r.answered; got != "blue" {
		t.Errorf("answer %q", got)
	}
}

// TestListenCheck: a non-loopback address needs a token.
func TestListenCheck(t *testing.T) {
	tests := []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8723", "", true},
		{"[::1]:8723", "", true},
		{"localhost:8723", "", true},
		{"127.0.0.2:80", "", true},
		{"0.0.0.0:8723", "", false},
		{":8723", "", false},
		{"[::]:8723", "", false},
		{"192.168.1.10:8723", "", false},
		{"example.com:8723", "", false},
		{"0.0.0.0:8723", "s3cret-token", true},
		{"no-port", "", false},
	}
	for _, tt := range tests {
		err := ListenCheck(tt.addr, tt.token)
		if (err == nil) != tt.ok {
			t.Errorf("ListenCheck(%q, %q) = %v, want ok=%v", tt.addr, tt.token, err, tt.ok)
		}
		if !tt.ok && tt.token == "" && tt.addr != "no-port" && !errors.Is(err, ErrTokenRequired) {
			t.Errorf("ListenCheck(%q) = %v, want ErrTokenRequired", tt.addr, err)
		}
	}
}

// TestOptionsValidate names the bad field.
func TestOptionsValidate(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	good := Options{Dispatcher: f.disp, Registry: f.reg, Store: f.store, Broker: f.broker, Metrics: f.metrics}
	tests := []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"valid", func(*Options) {}, ""},
		{"no dispatcher", func(o *Options) { o.Dispatcher = nil }, "Dispatcher"},
		{"no store", func(o *Options) { o.Store = nil }, "Store"},
		{"no broker", func(o *Options) { o.Broker = nil }, "Broker"},
		{"negative body", func(o *Options) { o.MaxBodyBytes = -1 }, "MaxBodyBytes"},
		{"token with space", func(o *Options) { o.Token = "a b" }, "Token"},
		{"origin with path", func(o *Options) { o.AllowOrigins = []string{"https://a.example/x"} }, "AllowOrigins"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := good
			tt.change(&o)
			err := o.Validate()
			if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate() = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}
