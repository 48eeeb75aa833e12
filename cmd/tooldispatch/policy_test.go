package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The operator's policy is a ceiling (SPEC §16): --approve and the
// configuration's [dispatcher] exclude are the most a turn may get, through
// run and through serve. A turn or request body may only narrow them.

// editCall is an edit_file call that writes content to path.
func editCall(id, path, content string) string {
	args, _ := json.Marshal(map[string]string{"path": path, "content": content})
	q, _ := json.Marshal(string(args))
	return fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":"edit_file","arguments":%s}}`, id, q)
}

// commandCall is a run_command call of argv.
func commandCall(id string, argv ...string) string {
	args, _ := json.Marshal(map[string]any{"argv": argv})
	q, _ := json.Marshal(string(args))
	return fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":"run_command","arguments":%s}}`, id, q)
}

// envelope is a run input turn (or a request body: the same fields) with
// the given extra fields and calls.
func envelope(fields string, calls ...string) string {
	if fields != "" {
		fields += ","
	}
	return "{" + fields + `"message":{"role":"assistant","tool_calls":[` + strings.Join(calls, ",") + "]}}"
}

// writeConfig writes a configuration file outside the workspace.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tooldispatch.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runTurns runs "tooldispatch run" in process on input and returns the
// results; a non-zero exit status fails the test.
func runTurns(t *testing.T, input string, args ...string) runOutput {
	t.Helper()
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, append(args, "--events=false", "-")...)
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	return out
}

// fileIs fails the test unless path holds want.
func fileIs(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || string(b) != want {
		t.Errorf("%s = %q (%v), want %q", filepath.Base(path), b, err, want)
	}
}

func TestRunApproveFlagIsACeiling(t *testing.T) {
	tests := []struct {
		name      string
		flag      []string
		turn      string // the envelope's approve field
		want      string
		wantNotes string
	}{
		{"none, turn all", []string{"--approve", "none"}, `"approve":"all"`, "skipped", "original\n"},
		{"none, turn ask", []string{"--approve", "none"}, `"approve":"ask"`, "skipped", "original\n"},
		{"ask without a terminal, turn all", []string{"--approve", "ask"}, `"approve":"all"`, "skipped", "original\n"},
		{"no flag and no terminal, turn all", nil, `"approve":"all"`, "skipped", "original\n"},
		{"all, turn none", []string{"--approve", "all"}, `"approve":"none"`, "skipped", "original\n"},
		{"all, turn says nothing", []string{"--approve", "all"}, `"run":"r"`, "ok", "changed\n"},
		{"all, turn all", []string{"--approve", "all"}, `"approve":"all"`, "ok", "changed\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			notes := filepath.Join(ws, "notes.md")
			if err := os.WriteFile(notes, []byte("original\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			input := envelope(tt.turn+`,"auto_load_schemas":true`, editCall("e1", "notes.md", "changed\n"))
			out := runTurns(t, input, append([]string{"--workspace", ws, "--data", t.TempDir(), "--provider", "claude-code"}, tt.flag...)...)
			if diff := cmp.Diff([]string{"e1:edit_file:" + tt.want}, out.statuses()); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			fileIs(t, notes, tt.wantNotes)
		})
	}
}

// TestRunSaysWhenApprovalWasLowered: a turn that asks for more approval
// than it gets (under --approve, or --approve ask with no terminal to ask
// on) starts with a policy_lowered event naming both, in run's output; a
// turn that gets what it asked for has none.
func TestRunSaysWhenApprovalWasLowered(t *testing.T) {
	tests := []struct {
		name string
		flag []string
		turn string // the envelope's approve field
		want string // asked->applied, or "" for no event
	}{
		{"none, turn all", []string{"--approve", "none"}, `"approve":"all"`, "all->none"},
		{"none, turn ask", []string{"--approve", "none"}, `"approve":"ask"`, "ask->none"},
		{"ask without a terminal, turn all", []string{"--approve", "ask"}, `"approve":"all"`, "all->none"},
		{"all, turn all", []string{"--approve", "all"}, `"approve":"all"`, ""},
		{"all, turn none", []string{"--approve", "all"}, `"approve":"none"`, ""},
		{"none, turn says nothing", []string{"--approve", "none"}, `"run":"r"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			input := envelope(tt.turn+`,"auto_load_schemas":true`, editCall("e1", "notes.md", "changed\n"))
			e, stdout, stderr := testEnv(strings.NewReader(input))
			code, out := runInProcess(t, e, stdout, stderr, append([]string{"--workspace", ws, "--data", t.TempDir(), "--provider", "claude-code"}, append(tt.flag, "-")...)...)
			if code != exitOK {
				t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
			}
			var got []string
			for _, ev := range out.events {
				if ev.Event == "policy_lowered" {
					got = append(got, ev.ApproveAsked+"->"+ev.ApproveApplied)
				}
			}
			var want []string
			if tt.want != "" {
				want = []string{tt.want}
				if len(out.events) == 0 || out.events[0].Event != "policy_lowered" {
					t.Errorf("the first event is not policy_lowered: %+v", out.events)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("policy_lowered events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunConfigExcludeIsACeiling: a tool the operator excludes is unknown
// to every turn, whatever the turn's own exclude list says, and whatever
// --approve allows.
func TestRunConfigExcludeIsACeiling(t *testing.T) {
	ws := t.TempDir()
	cfg := writeConfig(t, "[dispatcher]\nexclude = [\"run_command\"]\n")
	input := envelope(`"auto_load_schemas":true`, commandCall("c1", "touch", "pwned.txt")) + "\n" +
		envelope(`"auto_load_schemas":true,"exclude":[]`, commandCall("c2", "touch", "pwned.txt")) + "\n" +
		envelope(`"auto_load_schemas":true,"exclude":["calculate"]`, commandCall("c3", "touch", "pwned.txt")) + "\n"
	out := runTurns(t, input, "--workspace", ws, "--data", t.TempDir(), "--provider", "claude-code",
		"--approve", "all", "--config", cfg)
	want := []string{"c1:run_command:unknown_tool", "c2:run_command:unknown_tool", "c3:run_command:unknown_tool"}
	if diff := cmp.Diff(want, out.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(ws, "pwned.txt")); err == nil {
		t.Error("an excluded run_command ran")
	}
}

// TestRunConfigAutoLoadSchemas: [dispatcher] auto_load_schemas is the
// default of turns that do not say; a turn may still switch it off.
func TestRunConfigAutoLoadSchemas(t *testing.T) {
	ws := t.TempDir()
	cfg := writeConfig(t, "[dispatcher]\nauto_load_schemas = true\n")
	input := envelope(`"run":"a"`, editCall("e1", "a.txt", "a")) + "\n" +
		envelope(`"run":"b","auto_load_schemas":false`, editCall("e2", "b.txt", "b")) + "\n"
	out := runTurns(t, input, "--workspace", ws, "--data", t.TempDir(), "--provider", "claude-code",
		"--approve", "all", "--config", cfg)
	want := []string{"e1:edit_file:ok", "e2:edit_file:schema_returned"}
	if diff := cmp.Diff(want, out.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	fileIs(t, filepath.Join(ws, "a.txt"), "a")
}

// server is a "tooldispatch serve" process on a loopback port.
type server struct {
	base    string
	pid     int
	startup string // what the process wrote up to where it said it serves
	mu      sync.Mutex
	stderr  bytes.Buffer // guarded by mu; what the process wrote after start-up
}

// startServe starts the binary's serve with args on a free loopback port;
// it is stopped with SIGTERM when the test ends.
func startServe(t *testing.T, args ...string) *server {
	t.Helper()
	return startServeWith(t, nil, args...)
}

// startServeWith is startServe with the process set up by configure
// (environment, inherited descriptors) before it starts.
func startServeWith(t *testing.T, configure func(*exec.Cmd), args ...string) *server {
	t.Helper()
	// A call that asks is skipped at once rather than waiting for an
	// answer nobody gives.
	cmd := command(t, nil, append([]string{"serve", "--addr", "127.0.0.1:0", "--log-level", "warn", "--confirm-timeout", "1ms"}, args...)...)
	if configure != nil {
		configure(cmd)
	}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(pipe)
	s := &server{pid: cmd.Process.Pid}
	s.base, s.startup = servingOnAfter(t, cmd, r)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			s.mu.Lock()
			s.stderr.Write(b[:n])
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-drained
		// SIGTERM ends serve with status 128+15 after a clean shutdown.
		if err := cmd.Wait(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 128+int(syscall.SIGTERM) {
			s.mu.Lock()
			t.Errorf("serve: %v\n%s", err, s.stderr.String())
			s.mu.Unlock()
		}
	})
	return s
}

// waitLogged waits until serve's log holds want: its stderr reaches the
// test through a pipe a goroutine copies, so a line serve wrote before it
// answered a request may not be here yet when the answer is. It fails the
// test after a generous bound (a guard against waiting for ever).
func (s *server) waitLogged(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		s.mu.Lock()
		logged := s.stderr.String()
		s.mu.Unlock()
		if strings.Contains(logged, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("serve's log lacks %q:\n%s", want, logged)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// servingOn reads serve's log until it says where it serves and returns
// that base URL; it fails the test if serve ends first.
func servingOn(t *testing.T, cmd *exec.Cmd, r *bufio.Reader) string {
	t.Helper()
	base, _ := servingOnAfter(t, cmd, r)
	return base
}

// servingOnAfter is servingOn, and returns what serve wrote up to then.
func servingOnAfter(t *testing.T, cmd *exec.Cmd, r *bufio.Reader) (base, head string) {
	t.Helper()
	var b strings.Builder
	for {
		line, err := r.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			_ = cmd.Wait()
			t.Fatalf("serve ended before serving: %v\n%s", err, b.String())
		}
		if _, rest, ok := strings.Cut(line, "serving on "); ok {
			base, _, _ := strings.Cut(rest, " ")
			return base, b.String()
		}
	}
}

// turn posts a turn body to session and returns the status code and the
// results.
func (s *server) turn(t *testing.T, session, body string) (int, []toolMessageJSON) {
	t.Helper()
	return s.turnWithToken(t, "", session, body)
}

// turnWithToken is turn with a bearer token ("" for none).
func (s *server) turnWithToken(t *testing.T, token, session, body string) (int, []toolMessageJSON) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.base+"/v1/sessions/"+session+"/turns", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var reply struct {
		Messages []toolMessageJSON `json:"messages"`
	}
	if err := json.Unmarshal(b, &reply); err != nil {
		t.Fatalf("reply %q: %v", b, err)
	}
	return resp.StatusCode, reply.Messages
}

// statuses returns "id:name:status" for each message.
func statuses(ms []toolMessageJSON) []string {
	return runOutput{results: ms}.statuses()
}

func TestServeApproveFlagIsACeiling(t *testing.T) {
	ws := t.TempDir()
	notes := filepath.Join(ws, "notes.md")
	if err := os.WriteFile(notes, []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--workspace", ws, "--data", t.TempDir(), "--approve", "none")
	for i, fields := range []string{`"approve":"all"`, `"approve":"ask"`, `"run":"r"`} {
		t.Run(fields, func(t *testing.T) {
			id := fmt.Sprintf("e%d", i)
			body := envelope(`"provider":"claude-code","auto_load_schemas":true,`+fields, editCall(id, "notes.md", "changed\n"))
			code, ms := s.turn(t, "ceiling", body)
			if code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			if diff := cmp.Diff([]string{id + ":edit_file:skipped"}, statuses(ms)); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			// Skipped by the operator's policy, not after asking nobody.
			if !strings.Contains(ms[0].Content, "does not allow calls that change things") {
				t.Errorf("skipped for another reason: %q", ms[0].Content)
			}
			fileIs(t, notes, "original\n")
		})
	}
}

func TestServeApproveLowersOnly(t *testing.T) {
	ws := t.TempDir()
	s := startServe(t, "--workspace", ws, "--data", t.TempDir(), "--approve", "all")
	code, ms := s.turn(t, "lower", envelope(`"provider":"claude-code","auto_load_schemas":true,"approve":"none"`, editCall("e1", "a.txt", "a")))
	if code != http.StatusOK || !cmp.Equal(statuses(ms), []string{"e1:edit_file:skipped"}) {
		t.Errorf("approve none under --approve all: %d %v", code, statuses(ms))
	}
	code, ms = s.turn(t, "lower", envelope(`"provider":"claude-code","auto_load_schemas":true`, editCall("e2", "b.txt", "b")))
	if code != http.StatusOK || !cmp.Equal(statuses(ms), []string{"e2:edit_file:ok"}) {
		t.Errorf("no approve under --approve all: %d %v", code, statuses(ms))
	}
	fileIs(t, filepath.Join(ws, "b.txt"), "b")
}

func TestServeConfigExcludeIsACeiling(t *testing.T) {
	ws := t.TempDir()
	cfg := writeConfig(t, "[dispatcher]\nexclude = [\"run_command\"]\n")
	s := startServe(t, "--workspace", ws, "--data", t.TempDir(), "--approve", "all", "--config", cfg)
	for i, fields := range []string{`"run":"a"`, `"run":"b","exclude":[]`, `"run":"c","exclude":["calculate"]`} {
		id := fmt.Sprintf("c%d", i)
		code, ms := s.turn(t, "exclude", envelope(`"provider":"claude-code","auto_load_schemas":true,`+fields, commandCall(id, "touch", "pwned.txt")))
		if code != http.StatusOK || !cmp.Equal(statuses(ms), []string{id + ":run_command:unknown_tool"}) {
			t.Errorf("%s: %d %v", fields, code, statuses(ms))
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "pwned.txt")); err == nil {
		t.Error("an excluded run_command ran")
	}
	resp, err := http.Get(s.base + "/v1/tools?provider=claude-code")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.Contains(string(b), `"run_command"`) {
		t.Errorf("GET /v1/tools lists the excluded tool (%d): %.300s", resp.StatusCode, b)
	}
}

func TestServeConfigAutoLoadSchemas(t *testing.T) {
	ws := t.TempDir()
	cfg := writeConfig(t, "[dispatcher]\nauto_load_schemas = true\n")
	s := startServe(t, "--workspace", ws, "--data", t.TempDir(), "--approve", "all", "--config", cfg)
	code, ms := s.turn(t, "autoload", envelope(`"provider":"claude-code","run":"a"`, editCall("e1", "a.txt", "a")))
	if code != http.StatusOK || !cmp.Equal(statuses(ms), []string{"e1:edit_file:ok"}) {
		t.Errorf("auto_load_schemas from the configuration: %d %v", code, statuses(ms))
	}
	code, ms = s.turn(t, "autoload", envelope(`"provider":"claude-code","run":"b","auto_load_schemas":false`, editCall("e2", "b.txt", "b")))
	if code != http.StatusOK || !cmp.Equal(statuses(ms), []string{"e2:edit_file:schema_returned"}) {
		t.Errorf("a body switching auto_load_schemas off: %d %v", code, statuses(ms))
	}
}
