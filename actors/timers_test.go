package actors

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The timer tests run the whole dispatcher inside a synctest bubble: its
// clock moves only when every goroutine of the bubble is blocked, so a
// timer fires exactly when it is due, however loaded the machine is.

// TestConfirmTimeoutSkips: a confirmation nobody answers is refused after
// exactly ConfirmTimeout, and the call does not run.
func TestConfirmTimeoutSkips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		settleBubble(t)
		const wait = 7 * time.Second
		h := newHarness(t, func(c *Config) { c.ConfirmTimeout = wait })
		tr := turn("s1", "r1", call("w", "write", `{"path":"f"}`))
		tr.Approve = ApproveAsk
		start := time.Now()
		r := h.dispatch(tr)
		if d := time.Since(start); d != wait {
			t.Errorf("the turn ended after %v, want exactly the confirm timeout %v", d, wait)
		}
		if diff := cmp.Diff([]string{"w=skipped"}, statuses(r)); diff != "" {
			t.Fatalf("statuses (-want +got):\n%s", diff)
		}
		if !strings.Contains(r.Messages[0].Content, "no answer within "+wait.String()) {
			t.Errorf("content = %q, want it to say no answer came", r.Messages[0].Content)
		}
		if h.p.count("w") != 0 {
			t.Error("the unconfirmed call ran")
		}
	})
}

// TestWatchdogAbandonsAtTimeoutPlusGrace: a tool that ignores its context
// is abandoned at its timeout plus WatchdogGrace, not before, and reported
// timeout; its goroutine is counted as still running until it returns.
func TestWatchdogAbandonsAtTimeoutPlusGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		settleBubble(t)
		const grace = 3 * time.Second
		h := newHarness(t, func(c *Config) { c.WatchdogGrace = grace })
		tool, _ := h.d.cfg.Registry.Lookup("stubborn")
		total0, running0 := AbandonedCalls()
		start := time.Now()
		r := h.dispatch(turn("s1", "r1", call("stub", "stubborn", `{}`), call("ok", "echo", `{"x":"1"}`)))
		if d, want := time.Since(start), tool.Timeout+grace; d != want {
			t.Errorf("the turn ended after %v, want exactly timeout + grace = %v", d, want)
		}
		if diff := cmp.Diff([]string{"stub=timeout", "ok=ok"}, statuses(r)); diff != "" {
			t.Fatalf("statuses (-want +got):\n%s", diff)
		}
		if total, running := AbandonedCalls(); total != total0+1 || running != running0+1 {
			t.Errorf("AbandonedCalls = (%d, %d), want (%d, %d)", total, running, total0+1, running0+1)
		}
		close(h.p.release)
		synctest.Wait() // the abandoned tool returns and is counted out
		if _, running := AbandonedCalls(); running != running0 {
			t.Errorf("abandoned calls running = %d after the tool returned, want %d", running, running0)
		}
	})
}
