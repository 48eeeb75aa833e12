package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/integration_test/sdktypes"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// responsesTurn is the output of an OpenAI Responses response: several
// function_call items among reasoning and message items, one without a
// call_id and one whose arguments repeat a key.
const responsesTurn = `[{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Two reads and a sum."}],"encrypted_content":"gAAA"},` +
	`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Looking.","annotations":[]}]},` +
	`{"type":"function_call","id":"fc_1","call_id":"call_a","name":"read_files","arguments":"{\"paths\":[\"notes.md\"]}","status":"completed"},` +
	`{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"x"}},` +
	`{"type":"function_call","id":"fc_2","call_id":"call_b","name":"calculate","arguments":"{\"expression\":\"6*7\"}"},` +
	`{"type":"function_call","id":"fc_3","name":"calculate","arguments":"{\"expression\":\"1\",\"expression\":\"2\"}"},` +
	`{"type":"function_call","id":"fc_4","call_id":"call_d","name":"no_such_tool","arguments":"{}"}]`

// geminiTurn is a Gemini model content with two calls of one tool and no
// ids, beside a thought and a text part.
const geminiTurn = `{"role":"model","parts":[{"text":"Adding up.","thought":true},{"text":"Two sums."},` +
	`{"functionCall":{"name":"calculate","args":{"expression":"1+1"}},"thoughtSignature":"c2ln"},` +
	`{"functionCall":{"name":"calculate","args":{"expression":"2+2"}}}]}`

// wantCalls are the calls of both turns and their statuses, in order.
var wantCalls = []string{"call_a:read_files:ok", "call_b:calculate:ok", "call_3:calculate:invalid_args",
	"call_d:no_such_tool:unknown_tool", "call_1:calculate:ok", "call_2:calculate:ok"}

// sessionStatuses reads a session as `session` and GET /v1/sessions/{s}
// print it: "id:name:status" of each tool message.
func sessionStatuses(t *testing.T, b []byte) []string {
	t.Helper()
	var s struct {
		Tools []toolMessageJSON `json:"tools"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("session %s: %v", b, err)
	}
	return runOutput{results: s.Tools}.statuses()
}

// typedReplies declares the reply lines of a Responses turn and of a
// Gemini turn with their SDK types.
func typedReplies(prefix string, responses []json.RawMessage, gemini json.RawMessage, strict bool) string {
	var b strings.Builder
	typ := sdktypes.ResponsesOutput
	if strict {
		typ = sdktypes.ResponsesOutputStrict
	}
	for i, r := range responses {
		b.WriteString(sdktypes.Declare(fmt.Sprintf("%s_responses_%d", prefix, i), typ, string(r)))
	}
	var v any
	_ = json.Unmarshal(gemini, &v)
	b.WriteString(sdktypes.Declare(prefix+"_gemini", sdktypes.GeminiContent, sdktypes.GeminiLiteral(v)))
	return b.String()
}

// TestProviderTurnsThroughRunAndServe: a Responses turn (function_call
// items among reasoning and message items) and a Gemini turn (two calls of
// one tool without ids) go through run and through the service; every
// call gets one reply carrying its id (made up where missing), the
// replies type-check against the providers' SDKs, the statuses are in the
// events (and the default Responses shape), and the session reads back
// with every call.
func TestProviderTurnsThroughRunAndServe(t *testing.T) {
	ws := exampleWorkspace(t)
	data := t.TempDir()
	envelope := `{"session":"shapes","provider":"claude-code","auto_load_schemas":true,%s"message":%s}`
	files := map[string]string{}

	for _, strict := range []bool{false, true} {
		name := map[bool]string{false: "run", true: "run_strict"}[strict]
		input := fmt.Sprintf(envelope, `"run":"`+name+`",`, responsesTurn) + "\n" + fmt.Sprintf(envelope, `"run":"`+name+`",`, geminiTurn) + "\n"
		e, stdout, stderr := testEnv(strings.NewReader(input))
		args := []string{"run", "--workspace", ws, "--data", data, "--approve", "none"}
		if strict {
			args = append(args, "--openai-strict")
		}
		if code := e.main(append(args, "-")); code != exitOK {
			t.Fatalf("%s: exit status %d; stderr:\n%s", name, code, stderr.String())
		}
		var replies []json.RawMessage
		var statuses []string
		for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			var probe struct {
				Event string `json:"event"`
			}
			var ev eventLine
			if err := json.Unmarshal([]byte(l), &probe); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			if probe.Event != "" {
				if err := json.Unmarshal([]byte(l), &ev); err != nil {
					t.Fatal(err)
				}
				if ev.Event == "tool_result" {
					statuses = append(statuses, ev.CallID+":"+ev.Tool+":"+ev.Status)
				}
				continue
			}
			replies = append(replies, json.RawMessage(l))
		}
		// One line per call of the Responses turn, one for the Gemini turn.
		if len(replies) != 5 {
			t.Fatalf("%s: %d reply lines, want 5:\n%s", name, len(replies), stdout.String())
		}
		checkReplies(t, name, replies[:4], replies[4], strict)
		// The events' tool names are the tools run (read_files, not the
		// call's as sent) and their statuses the calls'.
		if diff := cmp.Diff(wantCalls, statuses); diff != "" {
			t.Errorf("%s: tool_result events (-want +got):\n%s", name, diff)
		}
		files[name+".ts"] = typedReplies(name, replies[:4], replies[4], strict)
	}

	// The session reads back with both runs' calls and statuses.
	e, stdout, stderr := testEnv(strings.NewReader(""))
	if code := e.main([]string{"session", "--workspace", ws, "--data", data, "--session", "shapes"}); code != exitOK {
		t.Fatalf("session: exit status %d; stderr:\n%s", code, stderr.String())
	}
	if diff := cmp.Diff(slices.Concat(wantCalls, wantCalls), sessionStatuses(t, []byte(stdout.String()))); diff != "" {
		t.Errorf("the session read back (-want +got):\n%s", diff)
	}

	// The same turns through the service.
	s := startServe(t, "--workspace", ws, "--data", t.TempDir(), "--approve", "none")
	post := func(body string) []json.RawMessage {
		t.Helper()
		resp, err := http.Post(s.base+"/v1/sessions/served/turns", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST turn: %d %s", resp.StatusCode, b)
		}
		var reply struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(b, &reply); err != nil {
			t.Fatal(err)
		}
		return reply.Messages
	}
	for _, strict := range []bool{false, true} {
		name := map[bool]string{false: "serve", true: "serve_strict"}[strict]
		extra := `"run":"` + name + `",`
		if strict {
			extra += `"reply":"openai-strict",`
		}
		body := `{"provider":"claude-code","auto_load_schemas":true,` + extra + `"message":%s}`
		responses := post(fmt.Sprintf(body, responsesTurn))
		gemini := post(fmt.Sprintf(body, geminiTurn))
		if len(responses) != 4 || len(gemini) != 1 {
			t.Fatalf("%s: %d Responses items and %d Gemini contents, want 4 and 1", name, len(responses), len(gemini))
		}
		checkReplies(t, name, responses, gemini[0], strict)
		files[name+".ts"] = typedReplies(name, responses, gemini[0], strict)
	}
	resp, err := http.Get(s.base + "/v1/sessions/served")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if diff := cmp.Diff(slices.Concat(wantCalls, wantCalls), sessionStatuses(t, b)); diff != "" {
		t.Errorf("GET /v1/sessions/served (-want +got):\n%s", diff)
	}

	if _, err := sdktypes.Check(t, files); err != nil {
		t.Fatalf("the replies of run and the service do not type-check against the SDKs: %v", err)
	}
}

// checkReplies checks the replies of the two turns: each call's id, in
// order, its status in the default Responses shape, Gemini's responses
// named as called, output on success and error on failure.
func checkReplies(t *testing.T, where string, responses []json.RawMessage, gemini json.RawMessage, strict bool) {
	t.Helper()
	var got []string
	for _, r := range responses {
		var item struct {
			Type, CallID, Output string
			Tooldispatch         *struct{ Status string } `json:"tooldispatch"`
		}
		if err := json.Unmarshal(r, &item); err != nil {
			t.Fatal(err)
		}
		var raw map[string]json.RawMessage
		_ = json.Unmarshal(r, &raw)
		item.CallID = strings.Trim(string(raw["call_id"]), `"`)
		status := "-"
		if item.Tooldispatch != nil {
			status = item.Tooldispatch.Status
		}
		got = append(got, item.Type+":"+item.CallID+":"+status)
	}
	want := []string{"function_call_output:call_a:ok", "function_call_output:call_b:ok",
		"function_call_output:call_3:invalid_args", "function_call_output:call_d:unknown_tool"}
	if strict {
		for i := range want {
			want[i] = want[i][:strings.LastIndex(want[i], ":")] + ":-"
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: Responses items (-want +got):\n%s", where, diff)
	}
	want = []string{`call_1:calculate:{"output":"2"}`, `call_2:calculate:{"output":"4"}`}
	var content struct {
		Role  string
		Parts []struct {
			FunctionResponse struct {
				ID, Name string
				Response json.RawMessage
			} `json:"functionResponse"`
		}
	}
	if err := json.Unmarshal(gemini, &content); err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, p := range content.Parts {
		got = append(got, p.FunctionResponse.ID+":"+p.FunctionResponse.Name+":"+string(p.FunctionResponse.Response))
	}
	if content.Role != "user" {
		t.Errorf("%s: Gemini reply role %q, want user", where, content.Role)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: Gemini functionResponses (-want +got):\n%s", where, diff)
	}
}

// TestToolsFormatsTypeCheck: `tools --format F` for every format and both
// tools-array policies prints an array each provider's SDK type accepts;
// the converted formats hold no keyword outside their subset; the tools
// left out are listed as refused with their reason.
func TestToolsFormatsTypeCheck(t *testing.T) {
	ws := exampleWorkspace(t)
	types := map[toolkit.ToolsFormat]string{
		toolkit.ToolsOpenAI: sdktypes.ChatToolsArray, toolkit.ToolsOpenAIStrict: sdktypes.ChatToolsArray,
		toolkit.ToolsResponses: sdktypes.ResponsesToolsArray, toolkit.ToolsAnthropic: sdktypes.AnthropicToolsArray,
		toolkit.ToolsGemini: sdktypes.GeminiToolsArray,
	}
	files := map[string]string{}
	for _, f := range toolkit.ToolsFormats {
		for _, provider := range []string{"openai", "claude-code"} {
			e, stdout, stderr := testEnv(strings.NewReader(""))
			if code := e.main([]string{"tools", "--workspace", ws, "--provider", provider, "--format", string(f)}); code != exitOK {
				t.Fatalf("tools --format %s: exit status %d; stderr:\n%s", f, code, stderr.String())
			}
			var out struct {
				Tools   json.RawMessage       `json:"tools"`
				Context string                `json:"context"`
				Refused []toolkit.RefusedTool `json:"refused"`
			}
			if err := json.Unmarshal([]byte(stdout.String()), &out); err != nil {
				t.Fatal(err)
			}
			if out.Context == "" {
				t.Errorf("tools --format %s: no context text", f)
			}
			n, schemas := toolSchemas(t, f, out.Tools)
			for _, sch := range schemas {
				for _, v := range toolkit.SubsetViolations(f, sch) {
					t.Errorf("tools --format %s --provider %s: %s", f, provider, v)
				}
			}
			for _, r := range out.Refused {
				if r.Reason == "" || !slices.Contains([]string{"http_request", "download_file", "html_template"}, r.Name) {
					t.Errorf("tools --format %s: refused %+v", f, r)
				}
			}
			t.Logf("--format %s --provider %s: %d tools, %d refused", f, provider, n, len(out.Refused))
			if provider == "openai" && n < 5 {
				t.Errorf("--format %s: %d tools in the lazy array", f, n)
			}
			var v any
			_ = json.Unmarshal(out.Tools, &v)
			lit := sdktypes.Literal(v)
			if f == toolkit.ToolsGemini {
				lit = sdktypes.GeminiLiteral(v)
			}
			files[fmt.Sprintf("%s_%s.ts", strings.ReplaceAll(string(f), "-", "_"), strings.ReplaceAll(provider, "-", "_"))] =
				sdktypes.Declare("tools", types[f], lit)
		}
	}
	if _, err := sdktypes.Check(t, files); err != nil {
		t.Fatalf("the tools arrays do not type-check against the SDKs: %v", err)
	}
}

// toolSchemas returns how many tools an array of format f holds and their
// parameter schemas.
func toolSchemas(t *testing.T, f toolkit.ToolsFormat, raw json.RawMessage) (int, []json.RawMessage) {
	t.Helper()
	var out []json.RawMessage
	switch f {
	case toolkit.ToolsGemini:
		var tools []toolkit.GeminiTool
		if err := json.Unmarshal(raw, &tools); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, tool := range tools {
			for _, d := range tool.FunctionDeclarations {
				n++
				if d.Parameters != nil {
					out = append(out, d.Parameters)
				}
			}
		}
		return n, out
	case toolkit.ToolsResponses:
		var tools []toolkit.ResponsesTool
		if err := json.Unmarshal(raw, &tools); err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools {
			out = append(out, tool.Parameters)
		}
	case toolkit.ToolsAnthropic:
		var tools []toolkit.AnthropicTool
		if err := json.Unmarshal(raw, &tools); err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools {
			out = append(out, tool.InputSchema)
		}
	default:
		var tools []toolkit.FunctionTool
		if err := json.Unmarshal(raw, &tools); err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools {
			out = append(out, tool.Function.Parameters)
		}
	}
	return len(out), out
}

// TestRunStrictToolsFormat: in a turn whose tools array was strict
// (tools_format openai-strict), a null for an optional property means it
// is absent; without it, the same null is refused by the full schema.
// find_tools hands out schemas in the turn's format, and run_tool takes
// the arguments as JSON text, as its strict schema says.
func TestRunStrictToolsFormat(t *testing.T) {
	ws := exampleWorkspace(t)
	find := `{"role":"assistant","tool_calls":[{"id":"f1","type":"function","function":{"name":"find_tools","arguments":"{\"query\":\"select:calculate,find_tools\",\"mode\":null,\"max_results\":null}"}}]}`
	run := `{"role":"assistant","tool_calls":[{"id":"r1","type":"function","function":{"name":"run_tool","arguments":"{\"name\":\"calculate\",\"arguments\":\"{\\\"expression\\\":\\\"2*21\\\"}\"}"}}]}`
	input := `{"run":"s","tools_format":"openai-strict","message":` + find + "}\n" +
		`{"run":"s","tools_format":"openai-strict","message":` + run + "}\n" +
		`{"run":"p","message":` + find + "}\n"
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(), "--events=false", "-")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	want := []string{"f1:find_tools:ok", "r1:calculate:ok", "f1:find_tools:invalid_args"}
	if diff := cmp.Diff(want, out.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	// find_tools' own optional query, converted: required and nullable.
	if c := out.results[0].Content; !strings.Contains(c, `"query":{"type":["string","null"]`) || !strings.Contains(c, `"required":["query","mode","max_results"]`) {
		t.Errorf("find_tools in openai-strict: %s", c)
	}
	if c := out.results[1].Content; c != "42" {
		t.Errorf("run_tool: %q", c)
	}
}
