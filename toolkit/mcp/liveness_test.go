package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp/mcptest"
)

// TestQueuedCallsSurviveACrash: a server SIGKILLed during a call with 50
// calls queued behind it (MCP tools run one at a time, as the dispatcher
// runs them): the call in flight ends with its outcome unknown, and the
// queued calls wait for the restart and run on the new server.
func TestQueuedCallsSurviveACrash(t *testing.T) {
	h := newHarness(t, []ServerConfig{{Name: "everything", Command: serverCommand(t, "server-everything", "stdio"), Timeout: 30 * time.Second}},
		func(m *Manager) {
			m.policy = backoff{initial: 400 * time.Millisecond, max: 4 * time.Second, healthy: time.Hour}
		})
	h.start()
	first := next(t, "the first session", h.ev.up)
	drain(h.ev.call)
	long := make(chan error, 1)
	go func() {
		_, err := h.call(context.Background(), "mcp__everything__trigger-long-running-operation", `{"duration":30,"steps":30}`)
		long <- err
	}()
	next(t, "the long call", h.ev.call)
	killed := time.Now()
	if err := syscall.Kill(first.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := next(t, "the killed call", long); !errors.Is(err, toolkit.ErrOutcomeUnknown) || !errors.Is(err, ErrServerFailed) {
		t.Fatalf("call in flight at the kill: %v; want ErrOutcomeUnknown", err)
	}
	ok, unknown := 0, 0
	var firstOK time.Duration
	for i := range 50 {
		got, err := h.call(context.Background(), "mcp__everything__echo", fmt.Sprintf(`{"message":"q%d"}`, i))
		switch {
		case err == nil && got == fmt.Sprintf("Echo: q%d", i):
			if ok == 0 {
				firstOK = time.Since(killed)
			}
			ok++
		case errors.Is(err, toolkit.ErrOutcomeUnknown):
			unknown++ // sent on the dead session before its end was seen
		default:
			t.Errorf("queued call %d = %q, %v", i, got, err)
		}
	}
	second := next(t, "the restarted session", h.ev.up)
	if second.pid == first.pid {
		t.Errorf("the server was not restarted (pid %d)", second.pid)
	}
	if ok < 49 {
		t.Errorf("%d of 50 queued calls ran on the restarted server (%d outcome unknown)", ok, unknown)
	}
	t.Logf("SIGKILL: %d/50 queued calls ok, %d outcome unknown; first queued call answered %s after the kill (restart back-off 400ms)",
		ok, unknown, firstOK.Round(time.Millisecond))
}

// TestHungServerIsRestarted: a SIGSTOPped server with a call waiting on it
// misses its ping, is declared hung, killed and restarted; the waiting call
// ends with its outcome unknown, and later calls succeed on the new server.
func TestHungServerIsRestarted(t *testing.T) {
	const hangTimeout = 1 * time.Second
	hung := make(chan time.Duration, 1)
	h := newHarness(t, []ServerConfig{{Name: "everything", Command: serverCommand(t, "server-everything", "stdio"),
		Timeout: 60 * time.Second, PingInterval: -time.Second, HangTimeout: hangTimeout}},
		func(m *Manager) {
			m.policy = backoff{initial: 100 * time.Millisecond, max: time.Second, healthy: time.Hour}
			m.hooks.hung = func(_ string, after time.Duration) { offer(hung, after) }
		})
	h.start()
	first := next(t, "the first session", h.ev.up)
	if err := syscall.Kill(first.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The process is killed by the restart; make sure it never lingers
	// stopped if the test fails first.
	t.Cleanup(func() { syscall.Kill(first.pid, syscall.SIGKILL) })
	stopped := time.Now()
	_, err := h.call(context.Background(), "mcp__everything__echo", `{"message":"are you there"}`)
	ended := time.Since(stopped)
	if !errors.Is(err, toolkit.ErrOutcomeUnknown) {
		t.Fatalf("call to the hung server: %v; want ErrOutcomeUnknown (its call timeout is 60s)", err)
	}
	detected := next(t, "the hang", hung)
	second := next(t, "the restarted session", h.ev.up)
	restarted := time.Since(stopped)
	if second.pid == first.pid || processAlive(first.pid) {
		t.Errorf("the hung server (pid %d) was not replaced: new pid %d, old alive %v", first.pid, second.pid, processAlive(first.pid))
	}
	for i := range 3 {
		got, err := h.call(context.Background(), "mcp__everything__echo", fmt.Sprintf(`{"message":"back %d"}`, i))
		if err != nil || got != fmt.Sprintf("Echo: back %d", i) {
			t.Errorf("call %d after the restart = %q, %v", i, got, err)
		}
	}
	t.Logf("SIGSTOP: hang timeout %s; ping unanswered for %s; waiting call ended %s after the stop; new server up %s after the stop",
		hangTimeout, detected.Round(time.Millisecond), ended.Round(time.Millisecond), restarted.Round(time.Millisecond))
}

// TestHungServerGetsNoMoreCalls: a SIGSTOPped server, a call waiting on it,
// and calls queued behind that one. Once the server is being pinged for a
// hang nothing more is sent to it: a queued call waits for the verdict and,
// the server declared hung, for its replacement. One whose own time ends
// before the replacement is up says "not sent" (toolkit.ErrNotSent); the
// others run on the new server.
func TestHungServerGetsNoMoreCalls(t *testing.T) {
	const hangTimeout = time.Second
	probing := make(chan struct{}, 64)
	hung := make(chan time.Duration, 1)
	proceed := make(chan struct{}, 1) // lets the restart go on
	var (
		mu   sync.Mutex
		sent []int // the process each call was sent to, in order
	)
	h := newHarness(t, []ServerConfig{{Name: "everything", Command: serverCommand(t, "server-everything", "stdio"),
		Timeout: 60 * time.Second, PingInterval: -time.Second, HangTimeout: hangTimeout}},
		func(m *Manager) {
			m.policy = backoff{initial: 100 * time.Millisecond, max: time.Second, healthy: time.Hour}
			m.hooks.probe = func(string) { offer(probing, struct{}{}) }
			m.hooks.hung = func(_ string, after time.Duration) { offer(hung, after) }
			observeCall, observeRetry := m.hooks.call, m.hooks.retry
			m.hooks.call = func(s, tool string, pid int) {
				observeCall(s, tool, pid)
				mu.Lock()
				sent = append(sent, pid)
				mu.Unlock()
			}
			m.hooks.retry = func(s string, d time.Duration, err error) {
				observeRetry(s, d, err)
				select {
				case <-proceed:
				case <-time.After(waitLimit):
				}
			}
		})
	h.start()
	first := next(t, "the first session", h.ev.up)
	drain(h.ev.call)
	if err := syscall.Kill(first.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(first.pid, syscall.SIGKILL) })

	// The call waiting on the stopped server ends (its turn is cancelled)
	// while the hang check's ping is out.
	waiting, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan error, 1)
	go func() {
		_, err := h.call(waiting, "mcp__everything__echo", `{"message":"waiting"}`)
		ended <- err
	}()
	next(t, "the waiting call sent", h.ev.call)
	next(t, "the hang check's ping", probing)
	cancel()
	if err := next(t, "the waiting call's end", ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled call: %v; want context.Canceled", err)
	}

	// The next call's time ends before the replacement is up.
	early, cancelEarly := context.WithTimeout(context.Background(), 2*hangTimeout)
	_, err := h.call(early, "mcp__everything__echo", `{"message":"queued early"}`)
	cancelEarly()
	if !errors.Is(err, toolkit.ErrNotSent) || !strings.Contains(err.Error(), "not sent") {
		t.Errorf("queued call whose time ran out before the replacement: %v; want ErrNotSent saying \"not sent\"", err)
	}
	detected := next(t, "the hang", hung)
	proceed <- struct{}{}

	for i := range 3 {
		got, err := h.call(context.Background(), "mcp__everything__echo", fmt.Sprintf(`{"message":"queued %d"}`, i))
		if err != nil || got != fmt.Sprintf("Echo: queued %d", i) {
			t.Errorf("queued call %d = %q, %v; want it run on the replacement", i, got, err)
		}
	}
	second := next(t, "the replacement", h.ev.up)
	mu.Lock()
	defer mu.Unlock()
	for i, pid := range sent[1:] {
		if pid == first.pid {
			t.Errorf("call %d was sent to the stopped server (pid %d) after its hang check began", i+2, pid)
		}
	}
	if len(sent) != 4 || sent[len(sent)-1] != second.pid {
		t.Errorf("calls sent to %v; want the first to %d, none for the call that ran out of time, three to %d", sent, first.pid, second.pid)
	}
	t.Logf("SIGSTOP: ping unanswered for %s; calls sent to %v (stopped %d, replacement %d)", detected.Round(time.Millisecond), sent, first.pid, second.pid)
}

// TestIdleHungServerIsReplaced: a server SIGSTOPped while no call waits on
// it misses a keep-alive ping, is declared hung like a server with calls
// waiting, killed and replaced; the next calls run on the replacement and
// none goes to the stopped process.
func TestIdleHungServerIsReplaced(t *testing.T) {
	hung := make(chan time.Duration, 1)
	var (
		mu   sync.Mutex
		sent []int
	)
	h := newHarness(t, []ServerConfig{{Name: "everything", Command: serverCommand(t, "server-everything", "stdio"),
		PingInterval: 500 * time.Millisecond, HangTimeout: time.Second}},
		func(m *Manager) {
			m.policy = backoff{initial: 100 * time.Millisecond, max: time.Second, healthy: time.Hour}
			m.hooks.hung = func(_ string, after time.Duration) { offer(hung, after) }
			observe := m.hooks.call
			m.hooks.call = func(s, tool string, pid int) {
				observe(s, tool, pid)
				mu.Lock()
				sent = append(sent, pid)
				mu.Unlock()
			}
		})
	h.start()
	first := next(t, "the first session", h.ev.up)
	if err := syscall.Kill(first.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(first.pid, syscall.SIGKILL) })
	detected := next(t, "the hang", hung)
	for i := range 3 {
		got, err := h.call(context.Background(), "mcp__everything__echo", fmt.Sprintf(`{"message":"after %d"}`, i))
		if err != nil || got != fmt.Sprintf("Echo: after %d", i) {
			t.Errorf("call %d after the hang = %q, %v", i, got, err)
		}
	}
	if processAlive(first.pid) {
		t.Errorf("the hung server (pid %d) is still alive", first.pid)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, pid := range sent {
		if pid == first.pid {
			t.Errorf("a call was sent to the stopped server: %v", sent)
		}
	}
	t.Logf("idle SIGSTOP: keep-alive ping unanswered for %s; calls sent to %v", detected.Round(time.Millisecond), sent)
}

// TestServerThatStopsReadingIsHung: a stdio server sends a burst of ping
// requests (under the flood budget) and then reads nothing more, so our
// answers fill its input and block. A write that waits hang_timeout
// declares it hung: its process is killed and it is restarted, and the
// answers queued with us go with the session. Close returns.
func TestServerThatStopsReadingIsHung(t *testing.T) {
	bad, _ := misbehavingServer(t, "bad", mcptest.ModePingBurstNoRead)
	bad.PingInterval, bad.HangTimeout = -1, time.Second
	hung := make(chan time.Duration, 1)
	h := newHarness(t, []ServerConfig{bad}, func(m *Manager) {
		m.policy = backoff{initial: time.Hour, max: time.Hour, healthy: time.Hour}
		m.hooks.hung = func(_ string, after time.Duration) { offer(hung, after) }
	})
	h.start()
	first := next(t, "the first session", h.ev.up)
	waited := next(t, "the hang", hung)
	retry := next(t, "the restart", h.ev.retry)
	if !strings.Contains(retry.err.Error(), "reads nothing more") {
		t.Errorf("restart after: %v; want the server declared hung for reading nothing", retry.err)
	}
	if processAlive(first.pid) {
		t.Errorf("the hung server (pid %d) is still alive", first.pid)
	}
	if st := h.m.Servers()[0]; st.State != StateRestarting {
		t.Errorf("status %+v; want restarting", st)
	}
	t.Logf("a write waited %s: %v", waited.Round(time.Millisecond), retry.err)
}
