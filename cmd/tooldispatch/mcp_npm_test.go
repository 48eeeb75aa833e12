package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit/mcp/mcptest"
)

// npmTurn is one turn of a `run` input: one call of tool with args, in the
// run all the turns share.
func npmTurn(id, tool string, args any) string {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf(`{"run":"r1","auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[`+
		`{"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}]}}`, id, tool, b)
}

// npmServersConfig is a configuration of the three npm reference servers:
// the filesystem server rooted at root, the memory server keeping its
// graph in memoryFile, server-everything; trusted names the servers whose
// annotations count. Every other setting is the default.
func npmServersConfig(t *testing.T, root, memoryFile string, trusted ...string) string {
	t.Helper()
	var b strings.Builder
	server := func(name string, argv []string, env string) {
		q := make([]string, len(argv))
		for i, a := range argv {
			q[i] = fmt.Sprintf("%q", a)
		}
		fmt.Fprintf(&b, "[[mcp.servers]]\nname = %q\ncommand = [%s]\n", name, strings.Join(q, ", "))
		if env != "" {
			fmt.Fprintf(&b, "env = { %s }\n", env)
		}
		for _, tr := range trusted {
			if tr == name {
				b.WriteString("trusted = true\n")
			}
		}
	}
	server("fs", mcptest.Command(t, "server-filesystem", root), "")
	server("memory", mcptest.Command(t, "server-memory"), fmt.Sprintf("MEMORY_FILE_PATH = %q", memoryFile))
	server("everything", mcptest.Command(t, "server-everything", "stdio"), "")
	return writeConfig(t, b.String())
}

// TestMCPWritesInvalidateReads: with the real npm servers and the default
// settings (no_dedup false, servers untrusted), every read after a write of
// the same server in the same run is answered fresh: a file read after
// edit_file, the old path after move_file, the memory graph after
// add_observations and delete_observations. A second call of a tool a
// trusted server declares not idempotent runs; an untrusted server's
// annotations count for nothing, so its repeat is answered deduped (a
// write is at most once per run).
func TestMCPWritesInvalidateReads(t *testing.T) {
	ws := t.TempDir()
	file := filepath.Join(ws, "f.txt")
	if err := os.WriteFile(file, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := npmServersConfig(t, ws, filepath.Join(t.TempDir(), "memory.jsonl"), "everything")
	moved := filepath.Join(ws, "g.txt")
	turns := []string{
		npmTurn("read1", "mcp__fs__read_text_file", map[string]any{"path": file}),
		npmTurn("edit", "mcp__fs__edit_file", map[string]any{"path": file, "edits": []any{map[string]any{"oldText": "one", "newText": "two"}}}),
		npmTurn("read2", "mcp__fs__read_text_file", map[string]any{"path": file}),
		npmTurn("move", "mcp__fs__move_file", map[string]any{"source": file, "destination": moved}),
		npmTurn("read3", "mcp__fs__read_text_file", map[string]any{"path": file}),
		npmTurn("create", "mcp__memory__create_entities", map[string]any{"entities": []any{
			map[string]any{"name": "alice", "entityType": "person", "observations": []any{"likes tea"}}}}),
		npmTurn("graph1", "mcp__memory__read_graph", map[string]any{}),
		npmTurn("search1", "mcp__memory__search_nodes", map[string]any{"query": "alice"}),
		npmTurn("add", "mcp__memory__add_observations", map[string]any{"observations": []any{
			map[string]any{"entityName": "alice", "contents": []any{"plays chess"}}}}),
		npmTurn("graph2", "mcp__memory__read_graph", map[string]any{}),
		npmTurn("delete", "mcp__memory__delete_observations", map[string]any{"deletions": []any{
			map[string]any{"entityName": "alice", "observations": []any{"likes tea"}}}}),
		npmTurn("search2", "mcp__memory__search_nodes", map[string]any{"query": "alice"}),
		npmTurn("toggle1", "mcp__everything__toggle-simulated-logging", map[string]any{}),
		npmTurn("toggle2", "mcp__everything__toggle-simulated-logging", map[string]any{}),
		npmTurn("fsread1", "mcp__fs__list_allowed_directories", map[string]any{}),
		npmTurn("fsread2", "mcp__fs__list_allowed_directories", map[string]any{}),
	}
	out := runTurns(t, strings.Join(turns, "\n"), "--workspace", ws, "--data", t.TempDir(), "--config", cfg,
		"--provider", "claude-code", "--approve", "all")
	got := map[string]toolMessageJSON{}
	for _, m := range out.results {
		got[m.ToolCallID] = m
	}
	t.Logf("statuses: %v", out.statuses())
	expect := func(id, status string, contains, lacks []string) {
		t.Helper()
		m, ok := got[id]
		if !ok {
			t.Errorf("%s: no result", id)
			return
		}
		if m.Status != status {
			t.Errorf("%s: status %s, want %s; content:\n%.400s", id, m.Status, status, m.Content)
		}
		for _, s := range contains {
			if !strings.Contains(m.Content, s) {
				t.Errorf("%s: content lacks %q:\n%.400s", id, s, m.Content)
			}
		}
		for _, s := range lacks {
			if strings.Contains(m.Content, s) {
				t.Errorf("%s: content still holds %q:\n%.400s", id, s, m.Content)
			}
		}
	}
	expect("read1", "ok", []string{"one"}, nil)
	expect("edit", "ok", nil, nil)
	expect("read2", "ok", []string{"two"}, []string{"one"})
	expect("move", "ok", nil, nil)
	expect("read3", "error", []string{"ENOENT"}, nil)
	expect("graph1", "ok", []string{"likes tea"}, nil)
	expect("search1", "ok", []string{"likes tea"}, nil)
	expect("graph2", "ok", []string{"likes tea", "plays chess"}, nil)
	expect("search2", "ok", []string{"plays chess"}, []string{"likes tea"})
	// everything is trusted: toggle-simulated-logging says idempotentHint
	// false, so its repeat acts again.
	expect("toggle1", "ok", nil, nil)
	expect("toggle2", "ok", nil, nil)
	if got["toggle1"].Content == got["toggle2"].Content {
		t.Errorf("the second toggle says what the first said (%q): it did not toggle back", got["toggle2"].Content)
	}
	// fs is untrusted: its readOnlyHint is ignored, the call is a write,
	// and a repeated write is answered from the first (at most once per run).
	expect("fsread1", "ok", []string{ws}, nil)
	expect("fsread2", "deduped", []string{ws}, nil)
}

// TestMCPProgressStreams: a long call of server-everything streams its
// progress: run sends a progress token with the call, and each of the
// server's notifications/progress becomes a tool_call_text event of the
// call, between its tool_call_start and tool_call_end.
func TestMCPProgressStreams(t *testing.T) {
	ws := t.TempDir()
	cfg := npmServersConfig(t, ws, filepath.Join(t.TempDir(), "memory.jsonl"))
	input := npmTurn("long", "mcp__everything__trigger-long-running-operation", map[string]any{"duration": 3, "steps": 6})
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(), "--config", cfg,
		"--provider", "claude-code", "--approve", "all", "-")
	if code != exitOK {
		t.Fatalf("run: exit status %d; stderr:\n%s", code, stderr.String())
	}
	if got := out.statuses(); len(got) != 1 || got[0] != "long:mcp__everything__trigger-long-running-operation:ok" {
		t.Fatalf("statuses = %v", got)
	}
	var kinds, texts []string
	for _, ev := range out.events {
		if ev.CallID != "long" {
			continue
		}
		kinds = append(kinds, ev.Event)
		if ev.Event == "tool_call_text" {
			texts = append(texts, ev.Text)
		}
	}
	if len(texts) < 3 {
		t.Fatalf("%d tool_call_text events for a call of 6 progress steps, want at least 3; events: %v", len(texts), kinds)
	}
	t.Logf("%d tool_call_text events: %q", len(texts), texts)
	if !strings.Contains(strings.Join(texts, ""), "progress 6/6") {
		t.Errorf("the last step's progress is not streamed: %q", texts)
	}
	start, end := slices.Index(kinds, "tool_call_start"), slices.Index(kinds, "tool_call_end")
	for i, k := range kinds {
		if k == "tool_call_text" && (i < start || i > end) {
			t.Errorf("a tool_call_text event outside tool_call_start … tool_call_end: %v", kinds)
		}
	}
}

// TestMCPStructuredContent: server-everything's get-structured-content
// declares an outputSchema; find_tools and tools --all show it, and a call
// returns the structured content, checked against it, as JSON text.
func TestMCPStructuredContent(t *testing.T) {
	ws := t.TempDir()
	cfg := npmServersConfig(t, ws, filepath.Join(t.TempDir(), "memory.jsonl"))
	const tool = "mcp__everything__get-structured-content"
	turns := []string{
		npmTurn("find", "find_tools", map[string]any{"query": "select:" + tool}),
		npmTurn("wx", tool, map[string]any{"location": "Chicago"}),
	}
	out := runTurns(t, strings.Join(turns, "\n"), "--workspace", ws, "--data", t.TempDir(), "--config", cfg,
		"--provider", "claude-code", "--approve", "all")
	got := map[string]toolMessageJSON{}
	for _, m := range out.results {
		got[m.ToolCallID] = m
	}
	var found struct {
		Tools []struct {
			Name         string         `json:"name"`
			OutputSchema map[string]any `json:"output_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(got["find"].Content), &found); err != nil || len(found.Tools) != 1 {
		t.Fatalf("find_tools = %q (%v)", got["find"].Content, err)
	}
	if props, _ := found.Tools[0].OutputSchema["properties"].(map[string]any); props["temperature"] == nil {
		t.Errorf("find_tools shows no output schema for %s: %q", tool, got["find"].Content)
	}
	if m := got["wx"]; m.Status != "ok" || m.Content != `{"conditions":"Light rain / drizzle","humidity":82,"temperature":36}` {
		t.Errorf("get-structured-content = %s %q; want ok and the structured content as JSON", m.Status, m.Content)
	}

	e, stdout, stderr := testEnv(nil)
	if code := e.main([]string{"tools", "--all", "--workspace", ws, "--config", cfg}); code != exitOK {
		t.Fatalf("tools --all: exit status %d; stderr:\n%s", code, stderr.String())
	}
	var all struct {
		Tools []struct {
			Name         string          `json:"name"`
			OutputSchema json.RawMessage `json:"output_schema"`
		} `json:"tools"`
		Servers []struct {
			Name     string `json:"name"`
			Protocol string `json:"protocol"`
		} `json:"mcp_servers"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &all); err != nil {
		t.Fatal(err)
	}
	for _, tl := range all.Tools {
		if tl.Name == tool && !strings.Contains(string(tl.OutputSchema), "humidity") {
			t.Errorf("tools --all: %s has output_schema %s", tool, tl.OutputSchema)
		}
	}
	// The npm servers' TypeScript SDK knows revisions up to 2025-11-25.
	for _, srv := range all.Servers {
		if srv.Protocol != "2025-11-25" {
			t.Errorf("tools --all: server %s speaks %q, want 2025-11-25", srv.Name, srv.Protocol)
		}
	}
	if len(all.Servers) != 3 {
		t.Errorf("tools --all: mcp_servers = %+v; want the three servers", all.Servers)
	}
}

// TestMCPImageReachesAnthropicReply: server-everything's get-tiny-image
// returns a PNG between two texts. Called in an Anthropic turn, the reply's
// tool_result carries the text (with the image's placeholder) and the PNG
// as an image block; the session read back keeps the image with its tool
// message.
func TestMCPImageReachesAnthropicReply(t *testing.T) {
	ws := t.TempDir()
	cfg := npmServersConfig(t, ws, filepath.Join(t.TempDir(), "memory.jsonl"))
	data := t.TempDir()
	input := `{"session":"img","auto_load_schemas":true,"message":{"role":"assistant","content":[` +
		`{"type":"tool_use","id":"toolu_1","name":"mcp__everything__get-tiny-image","input":{}}]}}`
	e, stdout, stderr := testEnv(strings.NewReader(input))
	if code := e.main([]string{"run", "--workspace", ws, "--data", data, "--config", cfg, "--provider", "claude-code",
		"--approve", "all", "--events=false", "-"}); code != exitOK {
		t.Fatalf("run: exit status %d; stderr:\n%s", code, stderr.String())
	}
	var reply struct {
		Role    string `json:"role"`
		Content []struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
			IsError   bool   `json:"is_error"`
			Content   []struct {
				Type   string `json:"type"`
				Text   string `json:"text"`
				Source struct {
					Type      string `json:"type"`
					MediaType string `json:"media_type"`
					Data      string `json:"data"`
				} `json:"source"`
			} `json:"content"`
		} `json:"content"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout.String())), &reply); err != nil {
		t.Fatalf("the reply is not one Anthropic user message with a tool_result of blocks: %v\n%.600s", err, stdout.String())
	}
	if reply.Role != "user" || len(reply.Content) != 1 || reply.Content[0].ToolUseID != "toolu_1" || reply.Content[0].IsError {
		t.Fatalf("reply = %.600s", stdout.String())
	}
	blocks := reply.Content[0].Content
	if len(blocks) != 2 || blocks[0].Type != "text" || blocks[1].Type != "image" {
		t.Fatalf("tool_result content = %+v; want a text block and an image block", blocks)
	}
	if !strings.Contains(blocks[0].Text, "[image 1: image/png, 3.9 KiB]") || !strings.Contains(blocks[0].Text, "MCP logo") {
		t.Errorf("text block = %q; want the server's texts and the image's placeholder", blocks[0].Text)
	}
	png, err := base64.StdEncoding.DecodeString(blocks[1].Source.Data)
	if blocks[1].Source.Type != "base64" || blocks[1].Source.MediaType != "image/png" || err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("image block = %+v (%v); want a base64 PNG", blocks[1].Source, err)
	}

	e, stdout, stderr = testEnv(nil)
	if code := e.main([]string{"session", "--workspace", ws, "--data", data, "--session", "img"}); code != exitOK {
		t.Fatalf("session: exit status %d; stderr:\n%s", code, stderr.String())
	}
	var sess struct {
		Tools []toolMessageJSON `json:"tools"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &sess); err != nil || len(sess.Tools) != 1 {
		t.Fatalf("session = %.600s (%v)", stdout.String(), err)
	}
	if p := sess.Tools[0].Parts; len(p) != 1 || p[0].Kind != "image" || p[0].MIMEType != "image/png" || p[0].Data != blocks[1].Source.Data {
		t.Errorf("the session read back keeps parts %+v; want the PNG", p)
	}
}

// TestServeMCPElicitation: server-everything's trigger-elicitation-request
// asks the user for input during the call. Through serve, the request is
// an "elicitation" event and a pending question (the server named, its
// schema given); an answer over the API that breaks the schema is refused
// with 400 naming the field, a matching one reaches the server, whose
// result echoes it. With nobody answering, the request is declined at the
// confirmation timeout.
func TestServeMCPElicitation(t *testing.T) {
	ws := t.TempDir()
	cfg := npmServersConfig(t, ws, filepath.Join(t.TempDir(), "memory.jsonl"))
	turn := `{"provider":"claude-code","auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[` +
		`{"id":"el1","type":"function","function":{"name":"mcp__everything__trigger-elicitation-request","arguments":"{}"}}]}}`
	post := func(url, body string) (int, string) {
		t.Helper()
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	t.Run("answered", func(t *testing.T) {
		s := startServe(t, "--workspace", ws, "--data", t.TempDir(), "--config", cfg, "--approve", "all", "--confirm-timeout", "60s")
		req, err := http.NewRequest("GET", s.base+"/v1/sessions/el/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "text/event-stream")
		events, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer events.Body.Close()
		type reply struct {
			code int
			body string
		}
		done := make(chan reply, 1)
		go func() {
			code, body := post(s.base+"/v1/sessions/el/turns", turn)
			done <- reply{code, body}
		}()
		sc := bufio.NewScanner(events.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Text() != "event: elicitation" {
			if !sc.Scan() {
				t.Fatalf("the event stream ended before the elicitation: %v", sc.Err())
			}
		}
		var ev eventLine
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		if ev.CallID != "el1" || ev.Text != "Please provide inputs for the following fields:" ||
			!strings.Contains(ev.Arguments, `"required":["name"]`) || !strings.Contains(ev.Note, `MCP server "everything"`) {
			t.Errorf("elicitation event = %+v", ev)
		}
		if strings.Contains(ev.Note, "Warning") {
			t.Errorf("a request for a name and an email is taken for one for a secret: %q", ev.Note)
		}
		code, body := post(s.base+"/v1/sessions/el/answer/el1", `{"content":{"name":"Ada Lovelace","integer":500}}`)
		if code != http.StatusBadRequest || !strings.Contains(body, `integer`) {
			t.Errorf("an answer over the schema's maximum: %d %s; want 400 naming the field", code, body)
		}
		code, body = post(s.base+"/v1/sessions/el/answer/el1", `{"content":{"name":"Ada Lovelace","check":true,"integer":7}}`)
		if code != http.StatusOK {
			t.Fatalf("a matching answer: %d %s", code, body)
		}
		r := <-done
		if r.code != http.StatusOK || !strings.Contains(r.body, "Name: Ada Lovelace") || !strings.Contains(r.body, "Favorite Integer: 7") {
			t.Errorf("the turn: %d %.800s; want the server's echo of the answer", r.code, r.body)
		}
	})

	t.Run("nobody answers", func(t *testing.T) {
		s := startServe(t, "--workspace", ws, "--data", t.TempDir(), "--config", cfg, "--approve", "all", "--confirm-timeout", "1s")
		code, body := post(s.base+"/v1/sessions/el/turns", turn)
		if code != http.StatusOK || !strings.Contains(body, "User declined to provide the requested information") {
			t.Errorf("the turn: %d %.800s; want the request declined", code, body)
		}
	})
}

// TestRunMCPElicitationIsDeclined: under run there is no person to
// answer. server-everything's trigger-elicitation-request asks for user
// input during the call: the server gets "decline" at once and the call
// ends with its own result (the server's text saying the user declined),
// not the call's timeout; the elicitation event is still there, marked
// declined, with the server named. An ask_user in the same run is
// skipped at once, saying nobody is there to answer.
func TestRunMCPElicitationIsDeclined(t *testing.T) {
	ws := t.TempDir()
	cfg := npmServersConfig(t, ws, filepath.Join(t.TempDir(), "memory.jsonl"))
	input := npmTurn("el1", "mcp__everything__trigger-elicitation-request", map[string]any{}) + "\n" +
		npmTurn("q1", "ask_user", map[string]any{"question": "Which colour?"}) + "\n"
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(), "--config", cfg,
		"--provider", "claude-code", "--approve", "all", "--confirm-timeout", "10m", "-")
	if code != exitOK {
		t.Fatalf("run: exit status %d; stderr:\n%s", code, stderr.String())
	}
	if got := out.statuses(); !slices.Equal(got, []string{"el1:mcp__everything__trigger-elicitation-request:ok", "q1:ask_user:skipped"}) {
		t.Errorf("statuses %v; want the elicitation's call ok with its own result and ask_user skipped", got)
	}
	if len(out.results) == 2 {
		if c := out.results[0].Content; !strings.Contains(c, "User declined to provide the requested information") {
			t.Errorf("the call's result %.400q; want the server's text for a declined request", c)
		}
		if c := out.results[1].Content; !strings.Contains(c, "nobody is there to answer") {
			t.Errorf("ask_user's result %.400q; want it to say nobody is there to answer", c)
		}
	}
	var elicit []eventLine
	for _, ev := range out.events {
		if ev.Event == "elicitation" {
			elicit = append(elicit, ev)
		}
	}
	if len(elicit) != 1 || elicit[0].CallID != "el1" || elicit[0].Status != "declined" || !strings.Contains(elicit[0].Note, `MCP server "everything"`) ||
		!strings.Contains(elicit[0].Note, "nobody") {
		t.Errorf("elicitation events %+v; want one of el1, declined, naming the server and why", elicit)
	}
}
