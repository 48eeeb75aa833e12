package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
)

// binary is the tooldispatch command built once for the process-level tests.
var binary, binDir string

func buildBinary() int {
	dir, err := os.MkdirTemp("", "tooldispatch-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = dir
	binary = filepath.Join(dir, "tooldispatch")
	build := exec.Command("go", "build", "-o", binary, "../../cmd/tooldispatch")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building tooldispatch:", err)
		return 1
	}
	return 0
}

func cleanupBinary() { os.RemoveAll(binDir) }

// envInt reads a positive integer from the environment, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func seed(t *testing.T) uint64 {
	s := uint64(envInt("TOOLDISPATCH_CHAOS_SEED", 20260901))
	t.Logf("seed %d (TOOLDISPATCH_CHAOS_SEED)", s)
	return s
}

const killSession = "chaos"

// killCallArgs is the side-file recording command of one call.
func killCallArgs(id string) string {
	b, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", "echo " + id + " >> ran.log; sleep 0.2"}})
	return string(b)
}

// killTurn is one turn envelope with a turn id and run_command calls.
type killTurn struct {
	TurnID string
	Calls  []string
}

func (k killTurn) body() map[string]any {
	var tcs []map[string]any
	for _, c := range k.Calls {
		tcs = append(tcs, map[string]any{"id": c, "type": "function", "function": map[string]any{"name": "run_command", "arguments": killCallArgs(c)}})
	}
	return map[string]any{
		"run": "r", "provider": "claude-code", "auto_load_schemas": true, "turn_id": k.TurnID, "approve": "all",
		"message": map[string]any{"role": "assistant", "tool_calls": tcs},
	}
}

func killTurns(prefix string, turns, calls int) []killTurn {
	var out []killTurn
	for t := 1; t <= turns; t++ {
		k := killTurn{TurnID: fmt.Sprintf("%s-t%d", prefix, t)}
		for c := 1; c <= calls; c++ {
			k.Calls = append(k.Calls, fmt.Sprintf("%s-t%dc%d", prefix, t, c))
		}
		out = append(out, k)
	}
	return out
}

// diskState is what `tooldispatch session` reads from --data.
type diskState struct {
	status map[string]string // call id → status
	turns  int
}

func readDisk(t *testing.T, ws, data string) diskState {
	t.Helper()
	return readSession(t, ws, data, killSession)
}

// readSession is what `tooldispatch session` reads of session from --data.
func readSession(t *testing.T, ws, data, session string) diskState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	left := listDir(data) // before the open, which may change what the kill left
	cmd := exec.CommandContext(ctx, binary, "session", "--workspace", ws, "--data", data, "--session", session)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 && strings.Contains(stderr.String(), "has no committed turns") {
		// The store opened and holds no turn of the session: a kill before
		// the first commit. Whether that lost anything is for
		// checkInvariants to say, against what was committed before.
		return diskState{status: map[string]string{}}
	}
	if err != nil {
		t.Fatalf("INVARIANT: session unreadable: %v\n%s\nthe kill left:\n%s%s", err, stderr.String(), left, storetest.KeepDir(data))
	}
	var d struct {
		Tools []struct {
			ToolCallID string `json:"tool_call_id"`
			Status     string `json:"status"`
		} `json:"tools"`
		ToolHistories []struct {
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"tool_histories"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("session output unreadable: %v\n%.2000s", err, out)
	}
	s := diskState{status: map[string]string{}}
	for _, tm := range d.Tools {
		if _, dup := s.status[tm.ToolCallID]; dup {
			t.Errorf("INVARIANT: call %s has two results", tm.ToolCallID)
		}
		s.status[tm.ToolCallID] = tm.Status
	}
	// Every call of every committed assistant message has a result.
	for _, h := range d.ToolHistories {
		if len(h.ToolCalls) > 0 {
			s.turns++
		}
		for _, c := range h.ToolCalls {
			if _, ok := s.status[c.ID]; !ok {
				t.Errorf("INVARIANT: call %s of a committed turn has no result", c.ID)
			}
		}
	}
	return s
}

// checkInvariants compares the disk with the side file and the previous
// state: committed results never change, nothing ran twice, every ok call
// ran exactly once, every call that ran has ok or outcome_unknown.
func checkInvariants(t *testing.T, ws string, prev, cur diskState, want []string) (dups int) {
	t.Helper()
	for id, st := range prev.status {
		if cur.status[id] != st {
			t.Errorf("INVARIANT: committed result of %s changed from %q to %q", id, st, cur.status[id])
		}
	}
	ran := map[string]int{}
	for _, id := range strings.Fields(readFile(filepath.Join(ws, "ran.log"))) {
		ran[id]++
	}
	for id, n := range ran {
		if n > 1 {
			dups++
			t.Errorf("INVARIANT: call %s executed %d times", id, n)
		}
		if st := cur.status[id]; st != "ok" && st != "outcome_unknown" && st != "" {
			t.Errorf("INVARIANT: call %s ran but reads %q", id, st)
		}
	}
	for id, st := range cur.status {
		switch st {
		case "ok":
			if ran[id] != 1 {
				t.Errorf("INVARIANT: call %s is ok but ran %d times", id, ran[id])
			}
		case "outcome_unknown", "canceled":
		default:
			t.Errorf("INVARIANT: call %s has unexpected status %q", id, st)
		}
	}
	for _, id := range want {
		if _, ok := cur.status[id]; !ok {
			t.Errorf("INVARIANT: call %s has no result after the rerun", id)
		}
	}
	return dups
}

// listDir lists the files of dir with their sizes.
func listDir(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "  " + err.Error() + "\n"
	}
	var b strings.Builder
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			fmt.Fprintf(&b, "  %s %d bytes\n", e.Name(), fi.Size())
		}
	}
	return b.String()
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// TestKillRun SIGKILLs `tooldispatch run` at seeded random points across
// many runs on the same --data, reruns each input (turn ids make it
// idempotent) and checks the invariants on disk after each. CI: 10 runs;
// TOOLDISPATCH_CHAOS_RUNS=50 for the full figure.
func TestKillRun(t *testing.T) {
	runs := envInt("TOOLDISPATCH_CHAOS_RUNS", 10)
	rng := rand.New(rand.NewPCG(seed(t), 1))
	ws, data := t.TempDir(), t.TempDir()
	var prev diskState
	var want []string
	kills, calls, unknown := 0, 0, 0
	for i := 0; i < runs; i++ {
		turns := killTurns(fmt.Sprintf("run%02d", i), 2, 2)
		var lines []string
		for _, k := range turns {
			b := k.body()
			b["session"] = killSession
			j, _ := json.Marshal(b)
			lines = append(lines, string(j))
			want = append(want, k.Calls...)
			calls += len(k.Calls)
		}
		input := filepath.Join(t.TempDir(), "turns.jsonl")
		if err := os.WriteFile(input, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"run", "--workspace", ws, "--data", data, "--approve", "all", "--shell", "--events=false", input}
		cmd := exec.Command(binary, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		delay := time.Duration(rng.IntN(1100)) * time.Millisecond
		if i == 0 {
			// The first kill lands at once, before anything is committed
			// (on a busy machine any early kill can): the store must open
			// and read empty.
			delay = 0
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			t.Logf("run %d finished before its kill at %v (err %v)", i, delay, err)
		case <-time.After(delay):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			kills++
		}
		mid := readDisk(t, ws, data)
		checkInvariants(t, ws, prev, mid, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		rerun, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("rerun %d: %v\n%s", i, err, rerun)
		}
		cur := readDisk(t, ws, data)
		checkInvariants(t, ws, mid, cur, want)
		prev = cur
		if t.Failed() {
			t.Fatalf("invariants broken after run %d (killed at %v); output:\n%s", i, delay, out.String())
		}
	}
	for _, st := range prev.status {
		if st == "outcome_unknown" {
			unknown++
		}
	}
	t.Logf("FIGURES run: runs=%d kills=%d calls=%d committed_turns=%d outcome_unknown=%d lost_turns=0 duplicates=0",
		runs, kills, calls, prev.turns, unknown)
}

// server is one `tooldispatch serve` process.
type server struct {
	cmd    *exec.Cmd
	url    string
	stderr *bytes.Buffer
	exited chan error
}

func startServer(t *testing.T, ws, data string, extra ...string) *server {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--approve", "all", "--shell", "--addr", "127.0.0.1:0", "--workspace", ws,
		"--data", data, "--log-level", "error"}, extra...)...)
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, stderr: &bytes.Buffer{}, exited: make(chan error, 1)}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			s.stderr.WriteString(line + "\n")
			if i := strings.Index(line, "serving on "); i >= 0 {
				f := strings.Fields(line[i+len("serving on "):])
				found <- f[0]
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() { s.exited <- cmd.Wait() }()
	select {
	case u := <-found:
		s.url = u
	case err := <-s.exited:
		t.Fatalf("serve exited: %v", err)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("serve did not start")
	}
	return s
}

func (s *server) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// stop ends the server with SIGTERM (a clean shutdown, exit 143) and
// fails the test if it ends otherwise.
func (s *server) stop(t *testing.T) {
	t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	<-s.exited
	if code := s.cmd.ProcessState.ExitCode(); code != 143 {
		t.Errorf("serve stopped with exit %d, want 143; stderr:\n%s", code, s.stderr.String())
	}
}

// post sends one turn; it returns the statuses by call id.
func (s *server) post(ctx context.Context, k killTurn) (map[string]string, error) {
	b, _ := json.Marshal(k.body())
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/sessions/"+killSession+"/turns", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
	}
	var r struct {
		Messages []struct {
			ToolCallID string `json:"tool_call_id"`
			Status     string `json:"status"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%v: %s", err, body)
	}
	m := map[string]string{}
	for _, x := range r.Messages {
		m[x.ToolCallID] = x.Status
	}
	return m, nil
}

// TestKillServe SIGKILLs `tooldispatch serve` at seeded random points while
// turns are posted, restarts it on the same --data, re-posts the turns
// (same turn ids) and checks the invariants. CI: 5 kills; with
// TOOLDISPATCH_CHAOS_RUNS=N, N/2 (at least 5).
func TestKillServe(t *testing.T) {
	runs := max(5, envInt("TOOLDISPATCH_CHAOS_RUNS", 10)/2)
	rng := rand.New(rand.NewPCG(seed(t), 2))
	ws, data := t.TempDir(), t.TempDir()
	var prev diskState
	var want []string
	kills, calls := 0, 0
	for i := 0; i < runs; i++ {
		turns := killTurns(fmt.Sprintf("srv%02d", i), 3, 2)
		for _, k := range turns {
			want = append(want, k.Calls...)
			calls += len(k.Calls)
		}
		s := startServer(t, ws, data)
		delay := time.Duration(rng.IntN(1300)) * time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		posted := make(chan struct{})
		go func() {
			defer close(posted)
			for _, k := range turns {
				if _, err := s.post(ctx, k); err != nil {
					return
				}
			}
		}()
		select {
		case <-posted:
			t.Logf("serve %d: all turns done before the kill at %v", i, delay)
			s.kill()
		case <-time.After(delay):
			s.kill()
			kills++
		}
		cancel()
		<-posted
		mid := readDisk(t, ws, data)
		checkInvariants(t, ws, prev, mid, nil)

		s = startServer(t, ws, data)
		ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
		for _, k := range turns {
			got, err := s.post(ctx, k)
			if err != nil {
				t.Fatalf("re-post %s: %v", k.TurnID, err)
			}
			for _, c := range k.Calls {
				if _, ok := got[c]; !ok {
					t.Errorf("re-post %s: no result for %s: %v", k.TurnID, c, got)
				}
			}
		}
		cancel()
		// Stop the server without grace; the check reads the disk.
		s.kill()
		cur := readDisk(t, ws, data)
		checkInvariants(t, ws, mid, cur, want)
		prev = cur
		if t.Failed() {
			t.Fatalf("invariants broken after serve run %d (killed at %v); stderr:\n%s", i, delay, s.stderr.String())
		}
	}
	unknown := 0
	for _, st := range prev.status {
		if st == "outcome_unknown" {
			unknown++
		}
	}
	t.Logf("FIGURES serve: runs=%d kills=%d (plus %d kills after the re-posts) calls=%d committed_turns=%d outcome_unknown=%d lost_turns=0 duplicates=0",
		runs, kills, runs, calls, prev.turns, unknown)
}
