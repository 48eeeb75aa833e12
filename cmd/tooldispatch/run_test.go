package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/cachestore/badger"
)

// runInProcess runs "tooldispatch run" with args and the given stdin and
// returns the exit status and the outputs.
func runInProcess(t *testing.T, e *env, stdout, stderr *lockedBuffer, args ...string) (int, runOutput) {
	t.Helper()
	code := e.main(append([]string{"run"}, args...))
	return code, parseRunOutput(t, stdout.String())
}

func TestRunApproveAllEditsAndReads(t *testing.T) {
	ws := exampleWorkspace(t)
	input := `{"role":"assistant","tool_calls":[` +
		`{"id":"e1","type":"function","function":{"name":"edit_file","arguments":"{\"path\":\"notes.md\",\"content\":\"rewritten\\n\"}"}},` +
		`{"id":"r1","type":"function","function":{"name":"read_files","arguments":{"paths":["notes.md"]}}}]}`
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(),
		"--provider", "claude-code", "--approve", "all", "--events=false", "-")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	// Under claude-code the first call of a tool returns its schema.
	want := []string{"e1:edit_file:schema_returned", "r1:read_files:schema_returned"}
	if diff := cmp.Diff(want, out.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if len(out.events) != 0 {
		t.Errorf("--events=false printed %d events", len(out.events))
	}

	input = `{"auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[` +
		`{"id":"e1","type":"function","function":{"name":"edit_file","arguments":"{\"path\":\"notes.md\",\"content\":\"rewritten\\n\"}"}},` +
		`{"id":"r1","type":"function","function":{"name":"read_files","arguments":{"paths":["notes.md"]}}}]}}`
	e, stdout, stderr = testEnv(strings.NewReader(input))
	code, out = runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(),
		"--provider", "claude-code", "--approve", "all", "-")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	if diff := cmp.Diff([]string{"e1:edit_file:ok", "r1:read_files:ok"}, out.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if !strings.Contains(out.results[1].Content, "rewritten") {
		t.Errorf("the read ran before the edit: %q", out.results[1].Content)
	}
	b, err := os.ReadFile(filepath.Join(ws, "notes.md"))
	if err != nil || string(b) != "rewritten\n" {
		t.Errorf("notes.md = %q, %v", b, err)
	}
	results := 0
	for _, ev := range out.events {
		if ev.Event == "tool_result" {
			results++
		}
		if ev.Session != "default" || !strings.HasPrefix(ev.Run, "run-") || ev.Turn != 1 || ev.Time == "" {
			t.Errorf("event %+v lacks its session, run, turn or time", ev)
		}
	}
	if results != 2 {
		t.Errorf("%d tool_result events, want 2", results)
	}
}

func TestRunClientToolsLastForTheRun(t *testing.T) {
	ws := exampleWorkspace(t)
	data := t.TempDir()
	lookup := `{"id":"%s","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\"}"}}`
	input := `{"client_tools":[{"type":"function","function":{"name":"lookup","description":"Look a word up.","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}}],` +
		`"message":{"role":"assistant","tool_calls":[` + strings.Replace(lookup, "%s", "l1", 1) + `]}}` + "\n" +
		`{"role":"assistant","tool_calls":[` + strings.Replace(lookup, "%s", "l2", 1) + `]}` + "\n" +
		`{"client_tools":[],"message":{"role":"assistant","tool_calls":[` + strings.Replace(lookup, "%s", "l3", 1) + `]}}` + "\n" +
		`{"run":"other","message":{"role":"assistant","tool_calls":[` + strings.Replace(lookup, "%s", "l4", 1) + `]}}` + "\n"
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", data, "--events=false")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	want := []string{"l1:lookup:client_pending", "l2:lookup:client_pending", "l3:lookup:unknown_tool", "l4:lookup:unknown_tool"}
	if diff := cmp.Diff(want, out.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
}

func TestRunStopsAtUnreadableInput(t *testing.T) {
	ws := exampleWorkspace(t)
	good := `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"find_tools","arguments":"{\"query\":\"select:calculate\"}"}}]}`
	tests := []struct {
		name   string
		input  string
		stderr string
	}{
		{name: "invalid JSON", input: good + "\n{\"role\":\"assistant\",}\n" + good, stderr: "turn 2 at byte 166: invalid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, stdout, stderr := testEnv(strings.NewReader(tt.input))
			code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(), "--events=false")
			if code != exitInput {
				t.Errorf("exit status %d, want %d", code, exitInput)
			}
			if diff := cmp.Diff([]string{"c1:find_tools:ok"}, out.statuses()); diff != "" {
				t.Errorf("the turn before the bad one (-want +got):\n%s", diff)
			}
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr does not contain %q:\n%s", tt.stderr, stderr.String())
			}
		})
	}
}

// fakeTTY is a terminal for prompts: the test answers through answers.
type fakeTTY struct {
	*io.PipeReader
	*signalWriter
	answers *io.PipeWriter
}

func (f *fakeTTY) Close() error {
	f.answers.Close()
	return f.PipeReader.Close()
}

func TestRunAsksOnTheTerminal(t *testing.T) {
	tests := []struct {
		name   string
		answer string
		want   string
	}{
		{name: "approved", answer: "y\n", want: "e1:edit_file:ok"},
		{name: "denied", answer: "n\n", want: "e1:edit_file:skipped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := exampleWorkspace(t)
			pr, pw := io.Pipe()
			prompted := make(chan struct{})
			tty := &fakeTTY{PipeReader: pr, signalWriter: &signalWriter{marker: "[y/N]", seen: prompted}, answers: pw}
			input := `{"auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[` +
				`{"id":"e1","type":"function","function":{"name":"edit_file","arguments":"{\"path\":\"new.txt\",\"content\":\"hi\"}"}}]}}`
			e, stdout, stderr := testEnv(strings.NewReader(input))
			e.openTTY = func() (io.ReadWriteCloser, error) { return tty, nil }
			done := make(chan struct{})
			go func() {
				defer close(done)
				<-prompted
				io.WriteString(pw, tt.answer)
			}()
			code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(), "--provider", "claude-code")
			<-done
			if code != exitOK {
				t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
			}
			if diff := cmp.Diff([]string{tt.want}, out.statuses()); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			prompt := tty.signalWriter.String()
			for _, s := range []string{"edit_file (call e1, session default)", `{"content":"hi","path":"new.txt"}`, "[y/N]"} {
				if !strings.Contains(prompt, s) {
					t.Errorf("prompt does not contain %q:\n%s", s, prompt)
				}
			}
			var confirms int
			for _, ev := range out.events {
				if ev.Event == "tool_confirm" {
					confirms++
					if ev.ArgsHash == "" {
						t.Errorf("tool_confirm without args_hash: %+v", ev)
					}
				}
			}
			if confirms != 1 {
				t.Errorf("%d tool_confirm events, want 1", confirms)
			}
		})
	}
}

func TestRunWithoutTerminalDegradesAskToNone(t *testing.T) {
	ws := exampleWorkspace(t)
	input := `{"approve":"ask","auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[` +
		`{"id":"e1","type":"function","function":{"name":"edit_file","arguments":"{\"path\":\"new.txt\",\"content\":\"hi\"}"}}]}}`
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(), "--provider", "claude-code", "--events=false")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	if diff := cmp.Diff([]string{"e1:edit_file:skipped"}, out.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if !strings.Contains(stderr.String(), `warning: turn 1 asks for approve "ask", but no terminal can be opened`) {
		t.Errorf("no warning on stderr:\n%s", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err == nil {
		t.Error("the skipped edit wrote new.txt")
	}
}

func TestRunSignalCancelsTheRunningTurn(t *testing.T) {
	tests := []struct {
		name string
		sig  os.Signal
		code int
	}{
		{name: "SIGINT", sig: syscall.SIGINT, code: exitSIGINT},
		{name: "SIGTERM", sig: syscall.SIGTERM, code: exitSIGTERM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := exampleWorkspace(t)
			in, inw := io.Pipe()
			defer inw.Close()
			started := make(chan struct{})
			stdout := &signalWriter{marker: `"event":"tool_call_start"`, seen: started}
			var stderr lockedBuffer
			sigs := make(chan os.Signal, 2)
			e := &env{stdin: in, stdout: stdout, stderr: &stderr, getwd: os.Getwd,
				notify:  func() (<-chan os.Signal, func()) { return sigs, func() {} },
				exitNow: func(code int) { t.Errorf("exitNow(%d) after one signal", code) }}
			go func() {
				io.WriteString(inw, `{"auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[`+
					`{"id":"s1","type":"function","function":{"name":"run_command","arguments":"{\"argv\":[\"sleep\",\"30\"]}"}}]}}`+"\n")
				<-started
				sigs <- tt.sig
			}()
			code := e.main([]string{"run", "--workspace", ws, "--data", t.TempDir(), "--provider", "claude-code", "--approve", "all"})
			if code != tt.code {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			out := parseRunOutput(t, stdout.String())
			if diff := cmp.Diff([]string{"s1:run_command:canceled"}, out.statuses()); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			if !strings.Contains(stderr.String(), "stopped by signal") {
				t.Errorf("stderr does not say why it stopped:\n%s", stderr.String())
			}
		})
	}
}

func TestRunStoreFailureExitsThree(t *testing.T) {
	ws := exampleWorkspace(t)
	data := t.TempDir()
	// Another process (here: this one) holds the data directory.
	held, err := badger.Open(badger.TestOptions(data))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, args := range [][]string{
		{"run", "--workspace", ws, "--data", data, "-"},
		{"session", "--data", data},
	} {
		e, stdout, stderr := testEnv(strings.NewReader(`{"role":"assistant","tool_calls":[]}`))
		if code := e.main(args); code != exitFailure {
			t.Errorf("%s: exit status %d, want %d", args[0], code, exitFailure)
		}
		if !strings.Contains(stderr.String(), "opening the store in "+data) {
			t.Errorf("%s: stderr does not name the store:\n%s", args[0], stderr.String())
		}
		if stdout.String() != "" {
			t.Errorf("%s: stdout = %q", args[0], stdout.String())
		}
	}
}

// TestRunClientToolBadSchema: a client tool whose schema does not compile
// gets its calls an error naming the reason; the other calls of the turn and
// the later turns run.
func TestRunClientToolBadSchema(t *testing.T) {
	ws := exampleWorkspace(t)
	find := `{"id":"%s","type":"function","function":{"name":"find_tools","arguments":"{\"query\":\"select:calculate\"}"}}`
	input := `{"client_tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string","minLength":"x"}}}}}],` +
		`"message":{"role":"assistant","tool_calls":[{"id":"l1","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\"}"}},` +
		strings.Replace(find, "%s", "c1", 1) + `]}}` + "\n" +
		`{"role":"assistant","tool_calls":[` + strings.Replace(find, "%s", "c2", 1) + `]}` + "\n"
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(), "--events=false")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	if diff := cmp.Diff([]string{"l1:lookup:error", "c1:find_tools:ok", "c2:find_tools:deduped"}, out.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if len(out.results) > 0 && !strings.Contains(out.results[0].Content, "schema does not compile") {
		t.Errorf("l1 content %q does not say why", out.results[0].Content)
	}
}

// TestRunFormatPolicy: the configured format policy decides whether a
// client tool's `"format": "email"` refuses a bad address, whatever draft
// the schema declares.
func TestRunFormatPolicy(t *testing.T) {
	input := `{"client_tools":[{"type":"function","function":{"name":"mail","parameters":{"type":"object","properties":{"to":{"type":"string","format":"email"}}}}},` +
		`{"type":"function","function":{"name":"mail7","parameters":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"to":{"type":"string","format":"email"}}}}}],` +
		`"message":{"role":"assistant","tool_calls":[{"id":"m1","type":"function","function":{"name":"mail","arguments":"{\"to\":\"nobody\"}"}},` +
		`{"id":"m2","type":"function","function":{"name":"mail7","arguments":"{\"to\":\"nobody\"}"}}]}}` + "\n"
	tests := []struct {
		name, config string
		want         []string
	}{
		{"default asserts", "", []string{"m1:mail:invalid_args", "m2:mail7:invalid_args"}},
		{"annotate", "[dispatcher]\nformats = \"annotate\"\n", []string{"m1:mail:client_pending", "m2:mail7:client_pending"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := exampleWorkspace(t)
			cfg := filepath.Join(t.TempDir(), "config.toml")
			if err := os.WriteFile(cfg, []byte(tt.config), 0o644); err != nil {
				t.Fatal(err)
			}
			e, stdout, stderr := testEnv(strings.NewReader(input))
			code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(), "--events=false", "--config", cfg)
			if code != exitOK {
				t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
			}
			if diff := cmp.Diff(tt.want, out.statuses()); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunClientToolCollision: a client tool may shadow a built-in the
// provider's array does not carry (the client's wins); where both would be
// in the array that turn is refused with a message and the input goes on.
func TestRunClientToolCollision(t *testing.T) {
	ws := exampleWorkspace(t)
	calc := `{"role":"assistant","tool_calls":[{"id":"%s","type":"function","function":{"name":"calculate","arguments":"{\"expression\":\"1+1\"}"}}]}`
	call := func(id string) string { return strings.Replace(calc, "%s", id, 1) }
	input := call("b1") + "\n" +
		`{"client_tools":[{"type":"function","function":{"name":"calculate","parameters":{"type":"object"}}}],"message":` + call("x1") + "}\n" +
		`{"provider":"claude-code","message":` + call("x2") + "}\n" +
		`{"client_tools":[],"message":` + call("b2") + "}\n"
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(), "--events=false")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	want := []string{"b1:calculate:deferred", "x1:calculate:client_pending", "x2:calculate:error", "b2:calculate:deferred"}
	if diff := cmp.Diff(want, out.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if len(out.results) == 4 && !strings.Contains(out.results[2].Content, `client tool "calculate" has the name of a built-in tool in the tools array of provider "claude-code"`) {
		t.Errorf("refused turn's content: %q", out.results[2].Content)
	}
	if !strings.Contains(stderr.String(), "turn refused") {
		t.Errorf("stderr does not warn of the refused turn:\n%s", stderr.String())
	}
}

// TestRunReadIsFreshAcrossInvocations: a read de-duplicated over a run that
// spans invocations (--run) is answered again from the file once the file
// changed outside the run; an unchanged file is still de-duplicated.
func TestRunReadIsFreshAcrossInvocations(t *testing.T) {
	ws := exampleWorkspace(t)
	data := t.TempDir()
	read := `{"auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[{"id":"%s","type":"function","function":{"name":"run_tool","arguments":"{\"name\":\"read_files\",\"arguments\":{\"paths\":[\"notes.md\"]}}"}}]}}` + "\n"
	invoke := func(id string) toolMessageJSON {
		t.Helper()
		e, stdout, stderr := testEnv(strings.NewReader(strings.Replace(read, "%s", id, 1)))
		code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", data, "--events=false", "--run", "r1")
		if code != exitOK || len(out.results) != 1 {
			t.Fatalf("exit status %d, %d results; stderr:\n%s", code, len(out.results), stderr.String())
		}
		return out.results[0]
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.md"), []byte("first version\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := invoke("r1"); r.Status != "ok" || !strings.Contains(r.Content, "first version") {
		t.Fatalf("first read: %s %q", r.Status, r.Content)
	}
	if r := invoke("r2"); r.Status != "deduped" || !strings.Contains(r.Content, "first version") {
		t.Fatalf("unchanged file: %s %q; want deduped", r.Status, r.Content)
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.md"), []byte("second version, edited outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := invoke("r3"); r.Status != "ok" || !strings.Contains(r.Content, "second version") {
		t.Errorf("read after the outside edit: %s %q; want the fresh content", r.Status, r.Content)
	}
}

// TestRunPatternTimeout: [dispatcher] pattern_timeout bounds a schema
// pattern's match; a value whose match runs past it is refused saying so.
func TestRunPatternTimeout(t *testing.T) {
	ws := exampleWorkspace(t)
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("[dispatcher]\npattern_timeout = \"5ms\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	input := `{"client_tools":[{"type":"function","function":{"name":"grep","parameters":{"type":"object","properties":{"s":{"type":"string","pattern":"^(a+)+$"}}}}}],` +
		`"message":{"role":"assistant","tool_calls":[{"id":"g1","type":"function","function":{"name":"grep","arguments":"{\"s\":\"` + strings.Repeat("a", 4000) + `!\"}"}}]}}` + "\n"
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(), "--events=false", "--config", cfg)
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	if diff := cmp.Diff([]string{"g1:grep:invalid_args"}, out.statuses()); diff != "" {
		t.Fatalf("statuses (-want +got):\n%s", diff)
	}
	if !strings.Contains(out.results[0].Content, "matching took longer than 5ms") {
		t.Errorf("content %q does not name the configured bound", out.results[0].Content)
	}
}
