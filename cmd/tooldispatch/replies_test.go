package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// openAIToolMessageSchema compiles the OpenAI chat-completions tool message
// schema (no properties besides role, tool_call_id and content).
func openAIToolMessageSchema(t *testing.T) *toolkit.Schema {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "messages", "testdata", "openai_tool_message.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := toolkit.NewSchemaCache().Compile(b)
	if err != nil {
		t.Fatalf("compiling the tool message schema: %v", err)
	}
	return s
}

// outputLines decodes every line of run's stdout as a JSON object.
func outputLines(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("output line %q is not a JSON object: %v", sc.Bytes(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestRunOpenAIStrict: with --openai-strict every tool message run prints
// validates against OpenAI's tool message schema, while the statuses stay
// in the tool_result events.
func TestRunOpenAIStrict(t *testing.T) {
	schema := openAIToolMessageSchema(t)
	ws := exampleWorkspace(t)
	input := `{"role":"assistant","reasoning_details":[{"type":"reasoning.text","text":"…"}],"tool_calls":[` +
		`{"id":"r1","type":"function","function":{"name":"read_files","arguments":"{\"paths\":[\"notes.md\"]}"}},` +
		`{"id":"u1","type":"function","function":{"name":"no_such_tool","arguments":"{}"}}]}`
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code := e.main([]string{"run", "--workspace", ws, "--data", t.TempDir(), "--provider", "claude-code",
		"--approve", "none", "--openai-strict", "-"})
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	var tools []map[string]any
	statuses := map[string]string{}
	for _, l := range outputLines(t, stdout.String()) {
		if l["event"] == "tool_result" {
			statuses[l["call_id"].(string)] = l["status"].(string)
			continue
		}
		if l["event"] == nil {
			tools = append(tools, l)
		}
	}
	if len(tools) != 2 {
		t.Fatalf("%d tool messages, want 2:\n%s", len(tools), stdout.String())
	}
	for _, m := range tools {
		if err := schema.Validate(m); err != nil {
			t.Errorf("tool message %v does not validate against the OpenAI schema: %v", m, err)
		}
	}
	want := map[string]string{"r1": "schema_returned", "u1": "unknown_tool"}
	if diff := cmp.Diff(want, statuses); diff != "" {
		t.Errorf("statuses of the tool_result events (-want +got):\n%s", diff)
	}
}

// TestRunAnthropicTurn: an assistant message in the Anthropic Messages
// shape (detected by its tool_use blocks, or named by the envelope's
// format) gets one user message of tool_result blocks, is_error set on
// failures; input objects go through the same strict parsing as OpenAI
// arguments (a duplicate key is refused).
func TestRunAnthropicTurn(t *testing.T) {
	ws := exampleWorkspace(t)
	input := `{"role":"assistant","content":[{"type":"thinking","thinking":"…","signature":"x"},{"type":"text","text":"Reading."},` +
		`{"type":"tool_use","id":"toolu_1","name":"read_files","input":{"paths":["notes.md"]}},` +
		`{"type":"tool_use","id":"toolu_2","name":"read_files","input":{"paths":["notes.md"],"paths":["data.csv"]}},` +
		`{"type":"tool_use","id":"toolu_3","name":"no_such_tool","input":{}}]}` + "\n" +
		`{"format":"anthropic","auto_load_schemas":true,"message":{"role":"assistant","content":[` +
		`{"type":"tool_use","id":"toolu_4","name":"read_files","input":{"paths":["data.csv"]}}]}}` + "\n"
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code := e.main([]string{"run", "--workspace", ws, "--data", t.TempDir(), "--provider", "claude-code",
		"--approve", "none", "--events=false", "-"})
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	type result struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
		Content   string `json:"content"`
		IsError   bool   `json:"is_error"`
	}
	var got []string
	var contents []string
	lines := outputLines(t, stdout.String())
	if len(lines) != 2 {
		t.Fatalf("%d lines, want one user message per turn:\n%s", len(lines), stdout.String())
	}
	for _, l := range lines {
		b, _ := json.Marshal(l)
		var m struct {
			Role    string   `json:"role"`
			Content []result `json:"content"`
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil || m.Role != "user" {
			t.Fatalf("line %s is not a user message of tool_result blocks: %v", b, err)
		}
		for _, r := range m.Content {
			got = append(got, r.Type+":"+r.ToolUseID+":"+map[bool]string{true: "error", false: "ok"}[r.IsError])
			contents = append(contents, r.Content)
		}
	}
	// Under claude-code the first call of read_files returns its schema
	// (not run: an error to the model); the duplicate key is refused; the
	// second turn loads schemas at once and reads.
	want := []string{"tool_result:toolu_1:error", "tool_result:toolu_2:error", "tool_result:toolu_3:error", "tool_result:toolu_4:ok"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool results (-want +got):\n%s", diff)
	}
	if !strings.Contains(contents[1], "duplicate") {
		t.Errorf("the duplicate key was not refused: %q", contents[1])
	}
	if !strings.Contains(contents[3], "date,sensor") {
		t.Errorf("toolu_4 did not read data.csv: %q", contents[3])
	}
}
