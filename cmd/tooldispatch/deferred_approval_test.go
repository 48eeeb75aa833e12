package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// startKilledLater starts serve like startServe, and returns with it a
// kill that ends it with SIGKILL (no shutdown at all) and waits for it.
func startKilledLater(t *testing.T, args ...string) (*server, func()) {
	t.Helper()
	cmd := command(t, nil, append([]string{"serve", "--addr", "127.0.0.1:0", "--log-level", "warn"}, args...)...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(pipe)
	s := &server{pid: cmd.Process.Pid, base: servingOn(t, cmd, r)}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	killed := false
	kill := func() {
		if killed {
			return
		}
		killed = true
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Errorf("serve did not end by SIGKILL: %v", cmd.ProcessState)
		}
	}
	t.Cleanup(kill)
	return s, kill
}

// pendingJSON is the body of GET /v1/pending (the confirmations).
type pendingJSON struct {
	Confirmations []struct {
		Session   string  `json:"session"`
		CallID    string  `json:"call_id"`
		ArgsHash  string  `json:"args_hash"`
		Deferred  bool    `json:"deferred"`
		Ceiling   string  `json:"ceiling"`
		TimeoutAt *string `json:"timeout_at"`
		Diff      string  `json:"diff"`
	} `json:"confirmations"`
}

func getPending(t *testing.T, s *server) pendingJSON {
	t.Helper()
	resp, err := http.Get(s.base + "/v1/pending")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p pendingJSON
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/pending: %d %v", resp.StatusCode, err)
	}
	return p
}

// confirmCall posts an answer and returns the status code and the body's status.
func confirmCall(t *testing.T, s *server, session, callID, hash string, approve bool) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"approve": approve, "args_hash": hash})
	resp, err := http.Post(s.base+"/v1/sessions/"+session+"/confirm/"+callID, "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var reply struct {
		Status string `json:"status"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&reply)
	return resp.StatusCode, reply.Status
}

// resultEvents follows a session's event stream and sends the status of
// every tool_result event, as "call_id=status".
func resultEvents(t *testing.T, s *server, session string) <-chan string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.base+"/v1/sessions/"+session+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	out := make(chan string, 16)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		result := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "event: tool_result":
				result = true
			case strings.HasPrefix(line, "data: ") && result:
				var ev struct {
					CallID string `json:"call_id"`
					Status string `json:"status"`
				}
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev)
				out <- ev.CallID + "=" + ev.Status
				result = false
			case line == "":
				result = false
			}
		}
	}()
	return out
}

// TestServeDeferredApprovalSurvivesSIGKILL: a turn under confirm defer
// returns at once with its edits awaiting_approval; serve is SIGKILLed and
// started again on the same data; the approvals are still listed; an
// answer with another hash is refused (409) and changes nothing; the
// right answer runs the edit once and amends its message once; a second
// answer gets 409; an approved edit whose file changed since its preview
// does not run.
func TestServeDeferredApprovalSurvivesSIGKILL(t *testing.T) {
	ws, data := t.TempDir(), t.TempDir()
	notes, other := filepath.Join(ws, "notes.md"), filepath.Join(ws, "other.md")
	for path, body := range map[string]string{notes: "original\n", other: "other\n"} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--workspace", ws, "--data", data, "--approve", "ask"}
	a, kill := startKilledLater(t, args...)
	body := envelope(`"provider":"claude-code","auto_load_schemas":true,"confirm":"defer"`,
		editCall("e1", "notes.md", "changed\n"), editCall("e2", "other.md", "mine\n"))
	code, ms := a.turn(t, "s", body)
	if want := []string{"e1:edit_file:awaiting_approval", "e2:edit_file:awaiting_approval"}; code != http.StatusOK || !cmp.Equal(statuses(ms), want) {
		t.Fatalf("deferred turn: %d %v, want %v", code, statuses(ms), want)
	}
	before := getPending(t, a)
	kill()
	fileIs(t, notes, "original\n")

	b := startServe(t, args...)
	after := getPending(t, b)
	if len(after.Confirmations) != 2 || !cmp.Equal(after, before) {
		t.Fatalf("pending after SIGKILL and restart = %+v, want as before: %+v", after, before)
	}
	hash := map[string]string{}
	for _, c := range after.Confirmations {
		if !c.Deferred || c.TimeoutAt != nil || c.Ceiling != "ask" || c.Diff == "" {
			t.Errorf("deferred approval listed as %+v, want deferred, no timeout, ceiling ask, with its diff", c)
		}
		hash[c.CallID] = c.ArgsHash
	}
	results := resultEvents(t, b, "s")
	if err := os.WriteFile(other, []byte("changed by someone\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	if code, st := confirmCall(t, b, "s", "e1", "0000", true); code != http.StatusConflict || st != "mismatch" {
		t.Errorf("an answer with another args_hash = %d %q, want 409 mismatch", code, st)
	}
	// The API refuses an answer that names no arguments hash before it
	// reaches the store (400, as for a blocking confirmation).
	if code, _ := confirmCall(t, b, "s", "e1", "", true); code != http.StatusBadRequest {
		t.Errorf("an answer without args_hash = %d, want 400", code)
	}
	if code, st := confirmCall(t, b, "s", "e1", hash["e1"], true); code != http.StatusOK || st != "accepted" {
		t.Fatalf("the answer = %d %q, want 200 accepted", code, st)
	}
	if got := <-results; got != "e1=ok" {
		t.Fatalf("tool_result after the approval = %q, want e1=ok", got)
	}
	fileIs(t, notes, "changed\n")
	if code, st := confirmCall(t, b, "s", "e1", hash["e1"], true); code != http.StatusConflict || st != "already_answered" {
		t.Errorf("a second answer = %d %q, want 409 already_answered", code, st)
	}
	if code, st := confirmCall(t, b, "s", "e2", hash["e2"], true); code != http.StatusOK || st != "accepted" {
		t.Fatalf("the answer for e2 = %d %q, want 200 accepted", code, st)
	}
	if got := <-results; got != "e2=skipped" {
		t.Errorf("tool_result of an edit whose file changed since its preview = %q, want e2=skipped", got)
	}
	fileIs(t, other, "changed by someone\n")

	resp, err := http.Get(b.base + "/v1/sessions/s")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sess struct {
		Tools []toolMessageJSON `json:"tools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&sess); err != nil {
		t.Fatal(err)
	}
	if want := []string{"e1:edit_file:ok", "e2:edit_file:skipped"}; !cmp.Equal(statuses(sess.Tools), want) {
		t.Errorf("session after the answers = %v, want %v (each call amended once)", statuses(sess.Tools), want)
	}
	if p := getPending(t, b); len(p.Confirmations) != 0 {
		t.Errorf("still pending after the answers: %+v", p.Confirmations)
	}
}
