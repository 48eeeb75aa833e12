package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// commandTimeout bounds one run of the binary, so a hang fails the test
// instead of stalling it.
const commandTimeout = 2 * time.Minute

// command returns the binary with args, detached from the test's terminal
// (a new session has no controlling terminal, so /dev/tty cannot be opened
// and --approve defaults to none).
func command(t *testing.T, stdin io.Reader, args ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Stdin = stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd
}

// execute runs the binary and returns its exit status and outputs.
func execute(t *testing.T, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := command(t, stdin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var xe *exec.ExitError
	switch {
	case errors.As(err, &xe):
		code = xe.ExitCode()
	case err != nil:
		t.Fatalf("running %v: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

func TestExampleEndToEnd(t *testing.T) {
	ws := exampleWorkspace(t)
	data := filepath.Join(t.TempDir(), "data")
	turns := filepath.Join("..", "..", "examples", "turns.jsonl")
	code, stdout, stderr := execute(t, nil, "run", "--workspace", ws, "--data", data, turns)
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	out := parseRunOutput(t, stdout)
	want := []string{
		"call_1:find_tools:ok",
		"call_2:read_files:deferred",
		"call_3:read_files:ok",
		"call_4:calculate:ok",
		"call_5:read_file:unknown_tool",
		"call_6:read_files:deduped",
		"call_7:edit_file:skipped",
		"call_8:find_files:schema_returned",
		"call_9:calculate:invalid_args",
	}
	if diff := cmp.Diff(want, out.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	byID := map[string]toolMessageJSON{}
	for _, r := range out.results {
		byID[r.ToolCallID] = r
	}
	if c := byID["call_4"].Content; c != "18.966666666666665" {
		t.Errorf("calculate returned %q", c)
	}
	if byID["call_6"].Content != byID["call_3"].Content || !strings.Contains(byID["call_3"].Content, "gh-2,19.6") {
		t.Errorf("the deduped read does not repeat the first one:\n%s\n---\n%s", byID["call_3"].Content, byID["call_6"].Content)
	}
	if !strings.Contains(byID["call_5"].Content, "read_files") {
		t.Errorf("the unknown tool's message has no hint: %q", byID["call_5"].Content)
	}

	// Every call has exactly one tool_result event, in call order; sequence
	// numbers grow; every event names its session, run and turn.
	var resultEvents []string
	var lastSeq uint64
	runs := map[string]bool{}
	for _, ev := range out.events {
		if ev.Seq <= lastSeq {
			t.Errorf("event seq %d after %d", ev.Seq, lastSeq)
		}
		lastSeq = ev.Seq
		runs[ev.Run] = true
		if ev.Session != "default" || ev.Turn < 1 || ev.Turn > 4 || ev.CallID == "" || ev.Tool == "" {
			t.Errorf("incomplete event %+v", ev)
		}
		if _, err := time.Parse(time.RFC3339Nano, ev.Time); err != nil {
			t.Errorf("event time %q: %v", ev.Time, err)
		}
		if ev.Event == "tool_result" {
			resultEvents = append(resultEvents, ev.CallID+":"+ev.Status)
		}
	}
	var wantEvents []string
	for _, w := range want {
		parts := strings.Split(w, ":")
		wantEvents = append(wantEvents, parts[0]+":"+parts[2])
	}
	if diff := cmp.Diff(wantEvents, resultEvents); diff != "" {
		t.Errorf("tool_result events (-want +got):\n%s", diff)
	}
	if len(runs) != 1 {
		t.Errorf("the turns of one invocation used %d runs, want 1", len(runs))
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes.md")); strings.Contains(string(b), "Answer:") {
		t.Error("the skipped edit changed notes.md")
	}

	// The session reads back from the store.
	code, stdout, stderr = execute(t, nil, "session", "--data", data)
	if code != exitOK {
		t.Fatalf("session: exit status %d; stderr:\n%s", code, stderr)
	}
	var sess struct {
		Tools         []toolMessageJSON `json:"tools"`
		ToolHistories []json.RawMessage `json:"tool_histories"`
	}
	if err := json.Unmarshal([]byte(stdout), &sess); err != nil {
		t.Fatalf("session output: %v\n%s", err, stdout)
	}
	if diff := cmp.Diff(out.results, sess.Tools); diff != "" {
		t.Errorf("persisted tool messages differ from the printed ones (-printed +persisted):\n%s", diff)
	}
	var roles []string
	for _, m := range sess.ToolHistories {
		var r struct {
			Role      string `json:"role"`
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		}
		if err := json.Unmarshal(m, &r); err != nil {
			t.Fatal(err)
		}
		roles = append(roles, r.Role)
		if r.Role == "assistant" && len(r.ToolCalls) == 0 {
			t.Errorf("assistant message without its tool calls: %s", m)
		}
	}
	wantRoles := strings.Fields("assistant tool tool assistant tool tool tool assistant tool tool assistant tool tool")
	if diff := cmp.Diff(wantRoles, roles); diff != "" {
		t.Errorf("tool_histories roles (-want +got):\n%s", diff)
	}

	// An unknown session is an error that names the sessions there.
	code, stdout, stderr = execute(t, nil, "session", "--data", data, "--session", "nobody")
	if code != exitInput || stdout != "" || !strings.Contains(stderr, `session "nobody" has no committed turns`) {
		t.Errorf("unknown session: exit %d, output %q, stderr %q", code, stdout, stderr)
	}
}

func TestDeduplicationSpansOneInvocation(t *testing.T) {
	ws := exampleWorkspace(t)
	data := t.TempDir()
	read := `{"auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[{"id":"%s","type":"function","function":{"name":"read_files","arguments":"{\"paths\":[\"data.csv\"]}"}}]}}`
	input := strings.Replace(read, "%s", "a", 1) + "\n" + strings.Replace(read, "%s", "b", 1) + "\n"
	for i := range 2 {
		code, stdout, stderr := execute(t, strings.NewReader(input), "run", "--workspace", ws, "--data", data, "--provider", "claude-code", "--events=false")
		if code != exitOK {
			t.Fatalf("invocation %d: exit status %d; stderr:\n%s", i+1, code, stderr)
		}
		if diff := cmp.Diff([]string{"a:read_files:ok", "b:read_files:deduped"}, parseRunOutput(t, stdout).statuses()); diff != "" {
			t.Errorf("invocation %d (-want +got):\n%s", i+1, diff)
		}
	}
	_, stdout, _ := execute(t, nil, "session", "--data", data)
	var sess struct {
		Tools []toolMessageJSON `json:"tools"`
	}
	if err := json.Unmarshal([]byte(stdout), &sess); err != nil || len(sess.Tools) != 4 {
		t.Errorf("session has %d tool messages (%v), want 4", len(sess.Tools), err)
	}
}

func TestToolsCommand(t *testing.T) {
	ws := exampleWorkspace(t)
	tests := []struct {
		name      string
		args      []string
		wantNames []string
		context   string
	}{
		{name: "openai", args: nil, wantNames: []string{"ask_user", "chat_history", "find_tools", "reasoning_guide", "run_tool", "write_result", "write_todo"}, context: "- read_files:"},
		{name: "claude-code", args: []string{"--provider", "claude-code"}, context: "only find_tools and client tools have their schemas loaded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := execute(t, nil, append([]string{"tools", "--workspace", ws}, tt.args...)...)
			if code != exitOK {
				t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
			}
			var got struct {
				Tools []struct {
					Type     string `json:"type"`
					Function struct {
						Name       string          `json:"name"`
						Parameters json.RawMessage `json:"parameters"`
					} `json:"function"`
				} `json:"tools"`
				Context string `json:"context"`
			}
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, stdout)
			}
			var names []string
			for _, tool := range got.Tools {
				names = append(names, tool.Function.Name)
				if tool.Type != "function" || len(tool.Function.Parameters) == 0 {
					t.Errorf("tool %+v is not in the function-tool shape", tool)
				}
			}
			if tt.wantNames != nil {
				if diff := cmp.Diff(tt.wantNames, names); diff != "" {
					t.Errorf("tools array (-want +got):\n%s", diff)
				}
			} else if len(names) < 10 {
				t.Errorf("claude-code gets only %v", names)
			}
			if !strings.Contains(got.Context, tt.context) {
				t.Errorf("context does not contain %q:\n%s", tt.context, got.Context)
			}
		})
	}

	t.Run("all", func(t *testing.T) {
		code, stdout, stderr := execute(t, nil, "tools", "--all", "--workspace", ws)
		if code != exitOK {
			t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
		}
		var got struct {
			Tools []map[string]json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, stdout)
		}
		readOnly := map[string]string{}
		for _, tool := range got.Tools {
			for _, k := range []string{"name", "description", "parameters", "concurrent", "read_only", "timeout_ms", "source"} {
				if _, ok := tool[k]; !ok {
					t.Errorf("tool %s has no %q", tool["name"], k)
				}
			}
			var name string
			json.Unmarshal(tool["name"], &name)
			readOnly[name] = string(tool["read_only"])
		}
		for name, want := range map[string]string{"read_files": "true", "edit_file": "false", "find_tools": "true"} {
			if readOnly[name] != want {
				t.Errorf("%s read_only = %s, want %s", name, readOnly[name], want)
			}
		}
	})

	if _, err := os.Stat(filepath.Join(ws, dataDirName)); err == nil {
		t.Errorf("tools created the data directory")
	}
	if data, err := defaultDataDir(ws); err != nil {
		t.Error(err)
	} else if _, err := os.Stat(data); err == nil {
		t.Errorf("tools created the data directory %s", data)
	}
}

func TestUnreadableInputExitsOne(t *testing.T) {
	ws := exampleWorkspace(t)
	input := `{"role":"assistant","tool_calls":[]}` + "\n" + `{"role":"assistant","tool_calls":"nope"}` + "\n"
	code, _, stderr := execute(t, strings.NewReader(input), "run", "--workspace", ws, "--data", t.TempDir())
	if code != exitInput {
		t.Errorf("exit status %d, want %d", code, exitInput)
	}
	if !regexp.MustCompile(`turn 2 at byte \d+: tool_calls must be an array`).MatchString(stderr) {
		t.Errorf("stderr does not name the turn and the byte:\n%s", stderr)
	}
}

func TestBadFlagExitsTwo(t *testing.T) {
	code, stdout, stderr := execute(t, nil, "run", "--approve", "sometimes")
	if code != exitUsage {
		t.Errorf("exit status %d, want %d", code, exitUsage)
	}
	if stdout != "" || !strings.Contains(stderr, `--approve must be ask, all or none, got "sometimes"`) || !strings.Contains(stderr, `"tooldispatch run --help"`) {
		t.Errorf("want the mistake and where the flags are on stderr only; stdout %q, stderr:\n%s", stdout, stderr)
	}
}

func TestInterruptedBinaryExits130(t *testing.T) {
	tests := []struct {
		name string
		sig  syscall.Signal
		code int
	}{
		{name: "SIGINT", sig: syscall.SIGINT, code: exitSIGINT},
		{name: "SIGTERM", sig: syscall.SIGTERM, code: exitSIGTERM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := exampleWorkspace(t)
			data := t.TempDir()
			cmd := command(t, nil, "run", "--workspace", ws, "--data", data, "--provider", "claude-code", "--approve", "all")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// stdin stays open: the command waits for more turns when the
			// signal comes.
			io.WriteString(stdin, `{"auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[`+
				`{"id":"s1","type":"function","function":{"name":"run_command","arguments":"{\"argv\":[\"sleep\",\"60\"]}"}}]}}`+"\n")
			var lines []string
			sc := bufio.NewScanner(stdout)
			sc.Buffer(nil, 16<<20)
			signaled := false
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if !signaled && strings.Contains(sc.Text(), `"event":"tool_call_start"`) {
					signaled = true
					if err := cmd.Process.Signal(tt.sig); err != nil {
						t.Fatal(err)
					}
				}
			}
			err = cmd.Wait()
			var xe *exec.ExitError
			if !errors.As(err, &xe) || xe.ExitCode() != tt.code {
				t.Fatalf("exit: %v, want status %d; stderr:\n%s", err, tt.code, stderr.String())
			}
			out := parseRunOutput(t, strings.Join(lines, "\n"))
			if diff := cmp.Diff([]string{"s1:run_command:canceled"}, out.statuses()); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			code, sess, _ := execute(t, nil, "session", "--data", data)
			if code != exitOK || !strings.Contains(sess, `"status": "canceled"`) {
				t.Errorf("the canceled turn is not committed:\n%s", sess)
			}
		})
	}
}
