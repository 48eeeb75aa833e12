package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/service/client"
)

// loadRetryDelay is how long a load session waits before it sends a turn
// again after a refusal (503) or a broken connection.
const loadRetryDelay = 50 * time.Millisecond

// clusterLoad sends turns on many sessions through the Go client while
// members stop, restart or die: each session sends its turns one after the
// other, each with a turn_id, and sends a turn again with the same turn_id
// until a member answers it (a broken connection, a 503 while a member
// drains or leaves). Every call appends its id to ran.log in the shared
// workspace, so executions can be counted.
type clusterLoad struct {
	t        *testing.T
	c        *client.Client
	ws       string
	sessions int
	script   func(session, turn int) string // the call's command after its echo
	logs     *memberLogs                    // the members' logs, where failures are noted too
	hist     *history                       // every attempt's operation, checked by check
	ms       []*member

	stop    chan struct{}
	wg      sync.WaitGroup
	posted  atomic.Int64 // turns sent (first attempts)
	retries atomic.Int64 // attempts sent again

	mu      sync.Mutex
	results map[string]loadResult // turn_id → its answer
	failed  []string
}

// loadResult is the answer one turn got.
type loadResult struct {
	status   string // the call's status
	replayed bool
	member   string
}

func newClusterLoad(t *testing.T, ms []*member, ws string, sessions int, token string) *clusterLoad {
	var addrs []string
	for _, m := range ms {
		addrs = append(addrs, m.http)
	}
	c, err := client.New(client.Options{Members: addrs, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return &clusterLoad{t: t, c: c, ws: ws, sessions: sessions, stop: make(chan struct{}), results: map[string]loadResult{},
		script: func(int, int) string { return "" }, logs: ms[0].logs, hist: newHistory(t, ms[0].logs), ms: ms}
}

// start starts the sessions' senders.
func (l *clusterLoad) start() {
	for i := 0; i < l.sessions; i++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for k := 0; ; k++ {
				select {
				case <-l.stop:
					return
				default:
				}
				l.turn(i, k)
			}
		}()
	}
}

// turn sends turn k of session i until a member answers it.
func (l *clusterLoad) turn(i, k int) {
	session, id := fmt.Sprintf("load-%d", i), fmt.Sprintf("l%d-t%d", i, k)
	body := map[string]any{"run": "r", "provider": "claude-code", "auto_load_schemas": true, "approve": "all", "turn_id": id,
		"message": map[string]any{"role": "assistant", "tool_calls": []any{commandCall(id, "echo "+id+" >> ran.log"+l.script(i, k))}}}
	l.posted.Add(1)
	deadline := time.Now().Add(2 * time.Minute)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			l.retries.Add(1)
			time.Sleep(loadRetryDelay)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		res, err := l.hist.turn(ctx, l.c, session, body)
		cancel()
		if err == nil && res.Status == http.StatusOK {
			var tr struct {
				Replayed bool   `json:"replayed"`
				Member   string `json:"member"`
				Messages []struct {
					Status string `json:"status"`
				} `json:"messages"`
			}
			if json.Unmarshal(res.Body, &tr) != nil || len(tr.Messages) != 1 {
				l.fail(fmt.Sprintf("%s: reply %s", id, res.Body))
				return
			}
			l.mu.Lock()
			l.results[id] = loadResult{status: tr.Messages[0].Status, replayed: tr.Replayed, member: tr.Member}
			l.mu.Unlock()
			return
		}
		if err == nil && res.Status != http.StatusServiceUnavailable {
			l.fail(fmt.Sprintf("%s: status %d %s", id, res.Status, res.Body))
			return
		}
		if time.Now().After(deadline) {
			l.fail(fmt.Sprintf("%s: no member answered within 2 minutes (last: %v %v)", id, err, res))
			return
		}
	}
}

func (l *clusterLoad) fail(msg string) {
	l.logs.note("load: %s", msg)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed = append(l.failed, msg)
}

// finish stops the senders once their current turns are answered.
func (l *clusterLoad) finish() {
	close(l.stop)
	l.wg.Wait()
}

// loadFigures is what a load saw, checked by check.
type loadFigures struct {
	posted, answered, retried, replayed int64
	unknown, canceled, lost, double     int
	executions                          int
	history                             historyFigures
}

// check verifies every posted turn got an answer with status ok (or
// canceled where allowCanceled), that every call ran at most once and
// every ok call exactly once, that the sessions in the store hold each
// turn once, and that the history of every attempt (and of every turn the
// test posted through l.hist) is one a session can give (history.check);
// it returns the figures.
func (l *clusterLoad) check(allowCanceled bool) loadFigures {
	t := l.t
	t.Helper()
	f := loadFigures{posted: l.posted.Load(), retried: l.retries.Load()}
	for _, msg := range l.failed {
		t.Error(msg)
	}
	ran := map[string]int{}
	for _, id := range strings.Fields(readFile(filepath.Join(l.ws, "ran.log"))) {
		ran[id]++
		f.executions++
	}
	for id, n := range ran {
		if n > 1 {
			f.double++
			t.Errorf("call %s ran %d times", id, n)
		}
	}
	for id, r := range l.results {
		f.answered++
		if r.replayed {
			f.replayed++
		}
		switch r.status {
		case "ok":
			if ran[id] != 1 {
				t.Errorf("call %s is ok but ran %d times", id, ran[id])
			}
		case "canceled":
			f.canceled++
			if !allowCanceled {
				t.Errorf("call %s canceled", id)
			}
		case "outcome_unknown":
			f.unknown++
			t.Errorf("call %s reads outcome_unknown", id)
		default:
			t.Errorf("call %s: status %s", id, r.status)
		}
	}
	f.lost = int(f.posted - f.answered)
	if f.lost != 0 {
		t.Errorf("%d turns posted got no answer", f.lost)
	}
	// The store: every answered turn committed once.
	for i := 0; i < l.sessions; i++ {
		res, err := l.c.Do(context.Background(), "GET", fmt.Sprintf("load-%d", i), "", nil)
		if err != nil || res.Status != http.StatusOK {
			t.Errorf("reading session load-%d: %v %v", i, err, res)
			continue
		}
		var sess struct {
			Tools []struct {
				ToolCallID string `json:"tool_call_id"`
			} `json:"tools"`
		}
		_ = json.Unmarshal(res.Body, &sess)
		seen := map[string]bool{}
		for _, m := range sess.Tools {
			if seen[m.ToolCallID] {
				t.Errorf("call %s committed twice", m.ToolCallID)
			}
			seen[m.ToolCallID] = true
		}
		for id := range l.results {
			if strings.HasPrefix(id, fmt.Sprintf("l%d-", i)) && !seen[id] {
				t.Errorf("call %s answered but not in the stored session", id)
			}
		}
	}
	f.history = l.hist.check(l.ms, http.DefaultClient)
	return f
}

// waitAnswered waits until n more turns than now were answered.
func (l *clusterLoad) waitAnswered(n int) {
	l.t.Helper()
	l.mu.Lock()
	target := len(l.results) + n
	l.mu.Unlock()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		l.mu.Lock()
		got, failed := len(l.results), len(l.failed)
		l.mu.Unlock()
		if got >= target || failed > 0 {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("the load answered %d turns in 2 minutes, want %d", got, target)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopMember sends sig to m and waits for it to exit (failing after
// bound); it returns the exit status and how long the exit took.
func stopMember(t *testing.T, m *member, sig syscall.Signal, bound time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	m.logs.note("%s: %v", m.name, sig)
	if err := m.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	return waitExit(t, m, bound), time.Since(start)
}

// waitExit waits for m to exit (killing it and failing after bound) and
// returns its exit status.
func waitExit(t *testing.T, m *member, bound time.Duration) int {
	t.Helper()
	exited := make(chan struct{})
	go func() {
		_ = m.cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
		m.logs.note("%s: exited %v", m.name, m.cmd.ProcessState)
	case <-time.After(bound):
		_ = m.cmd.Process.Kill()
		<-exited
		t.Fatalf("the member did not exit within %v:\n%s", bound, m.log)
	}
	return m.cmd.ProcessState.ExitCode()
}

// restartMember starts m again with the same command line.
func restartMember(t *testing.T, m *member) {
	t.Helper()
	cmd := exec.Command(m.cmd.Path, m.cmd.Args[1:]...)
	cmd.Env = m.cmd.Env
	m.cmd = cmd
	m.logs.attach(t, m)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
}
