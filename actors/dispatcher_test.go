package actors

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

func TestTurnResultsInCallOrder(t *testing.T) {
	h := newHarness(t, nil)
	r := h.dispatch(turn("s1", "r1",
		call("a", "echo", `{"ms":30,"x":"1"}`),
		call("b", "echo", `{"x":"2"}`),
		call("c", "nope", `{}`),
		call("d", "echo", `{"x":"3"}`)))
	want := []string{"a=ok", "b=ok", "c=unknown_tool", "d=ok"}
	if diff := cmp.Diff(want, statuses(r)); diff != "" {
		t.Fatalf("statuses (-want +got):\n%s", diff)
	}
	if r.Messages[0].Content != `echo {"ms":30,"x":"1"}` {
		t.Errorf("content = %q", r.Messages[0].Content)
	}
	turns, err := h.store.Turns(context.Background(), "s1")
	if err != nil || len(turns) != 1 || len(turns[0].ToolMessages) != 4 {
		t.Fatalf("persisted turns = %v, %v", turns, err)
	}
}

func TestLimitHeldAndReached(t *testing.T) {
	h := newHarness(t, nil)
	var calls []*messages.ToolCall
	for i := 0; i < 9; i++ {
		calls = append(calls, call(string(rune('a'+i)), "echo", `{"ms":40,"x":"`+string(rune('a'+i))+`"}`))
	}
	h.dispatch(turn("s1", "r1", calls...))
	if got := h.p.peak.Load(); got != 3 {
		t.Fatalf("peak in flight = %d, want exactly the limit 3", got)
	}
}

func TestProgramOrder(t *testing.T) {
	h := newHarness(t, nil)
	h.dispatch(turn("s1", "r1",
		call("c1", "echo", `{"ms":40,"x":"1"}`),
		call("c2", "echo", `{"ms":10,"x":"2"}`),
		call("w", "write", `{"ms":20,"path":"f"}`),
		call("c3", "echo", `{"ms":10,"x":"3"}`)))
	log := h.p.snapshot()
	idx := func(s string) int {
		for i, l := range log {
			if l == s {
				return i
			}
		}
		t.Fatalf("%s missing from %v", s, log)
		return -1
	}
	if !(idx("end:c1") < idx("start:w") && idx("end:c2") < idx("start:w") && idx("end:w") < idx("start:c3")) {
		t.Fatalf("sequential call overlapped concurrent ones: %v", log)
	}
}

func TestTimeoutPanicAndFailureStayInTheirCall(t *testing.T) {
	h := newHarness(t, nil)
	r := h.dispatch(turn("s1", "r1",
		call("ok1", "echo", `{"x":"1"}`),
		call("slow", "slowpoke", `{}`),
		call("bang", "boom", `{}`),
		call("stub", "stubborn", `{}`),
		call("bad", "fail", `{}`),
		call("ok2", "echo", `{"x":"2"}`)))
	want := []string{"ok1=ok", "slow=timeout", "bang=error", "stub=timeout", "bad=error", "ok2=ok"}
	if diff := cmp.Diff(want, statuses(r)); diff != "" {
		t.Fatalf("statuses (-want +got):\n%s", diff)
	}
	if !strings.Contains(r.Messages[2].Content, "boom went the tool") {
		t.Errorf("panic text missing: %q", r.Messages[2].Content)
	}
	if !strings.Contains(r.Messages[4].Content, "next: ") {
		t.Errorf("failed call has no next: line: %q", r.Messages[4].Content)
	}
	total, running := AbandonedCalls()
	if total < 1 || running < 1 {
		t.Errorf("abandoned = %d, running %d; want the stubborn call counted", total, running)
	}
	close(h.p.release)
}

func TestCancelKeepsFinishedSiblings(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	// Cancel once long runs and quick's outcome is recorded (the pool
	// emits tool_call_end when it records an outcome).
	started, quickDone := make(chan struct{}, 8), make(chan struct{}, 8)
	h.mu.Lock()
	h.onEv = func(e *messages.Event) {
		switch {
		case e.Kind == EventToolCallStart && e.CallId == "long":
			started <- struct{}{}
		case e.Kind == EventToolCallEnd && e.CallId == "quick":
			quickDone <- struct{}{}
		}
	}
	h.mu.Unlock()
	go func() {
		<-started
		<-quickDone
		cancel()
	}()
	r, err := h.d.Dispatch(ctx, turn("s1", "r1",
		call("quick", "echo", `{"x":"1"}`),
		call("long", "echo", `{"ms":5000,"x":"2"}`),
		call("w", "write", `{"path":"p"}`)))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"quick=ok", "long=canceled", "w=canceled"}
	if diff := cmp.Diff(want, statuses(r)); diff != "" {
		t.Fatalf("statuses (-want +got):\n%s", diff)
	}
	if h.p.count("w") != 0 {
		t.Fatal("a call after the cancellation ran")
	}
	turns, _ := h.store.Turns(context.Background(), "s1")
	if len(turns) != 1 {
		t.Fatalf("canceled turn not committed: %d turns", len(turns))
	}
}

func TestDedupWithinAndAcrossTurnsNotAcrossRuns(t *testing.T) {
	h := newHarness(t, nil)
	r := h.dispatch(turn("s1", "r1", call("a", "echo", `{"x":"1"}`), call("b", "echo", `{ "x" : "1" }`)))
	if diff := cmp.Diff([]string{"a=ok", "b=deduped"}, statuses(r)); diff != "" {
		t.Fatalf("within turn (-want +got):\n%s", diff)
	}
	if r.Messages[1].Content != r.Messages[0].Content {
		t.Errorf("duplicate content differs")
	}
	r = h.dispatch(turn("s1", "r1", call("c", "echo", `{"x":"1"}`)))
	if diff := cmp.Diff([]string{"c=deduped"}, statuses(r)); diff != "" {
		t.Fatalf("across turns (-want +got):\n%s", diff)
	}
	r = h.dispatch(turn("s1", "r2", call("d", "echo", `{"x":"1"}`)))
	if diff := cmp.Diff([]string{"d=ok"}, statuses(r)); diff != "" {
		t.Fatalf("across runs (-want +got):\n%s", diff)
	}
	if got := h.p.count("a") + h.p.count("b") + h.p.count("c") + h.p.count("d"); got != 2 {
		t.Fatalf("echo ran %d times, want 2", got)
	}
}

func TestMutationInvalidatesReads(t *testing.T) {
	h := newHarness(t, nil)
	h.dispatch(turn("s1", "r1", call("r1", "read", `{"path":"a/b.txt"}`), call("r2", "read", `{"path":"c.txt"}`)))
	r := h.dispatch(turn("s1", "r1",
		call("r3", "read", `{"path":"a/b.txt"}`),
		call("w", "write", `{"path":"a/b.txt"}`),
		call("r4", "read", `{"path":"a/b.txt"}`),
		call("r5", "read", `{"path":"c.txt"}`)))
	want := []string{"r3=deduped", "w=ok", "r4=ok", "r5=deduped"}
	if diff := cmp.Diff(want, statuses(r)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestEventOrder(t *testing.T) {
	h := newHarness(t, nil)
	h.dispatch(turn("s1", "r1", call("a", "echo", `{"x":"1"}`), call("b", "fail", `{}`)))
	if diff := cmp.Diff([]string{"tool_call", "tool_call_start", "tool_call_end", "tool_result"}, h.eventKinds("a")); diff != "" {
		t.Errorf("ok call events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"tool_call", "tool_call_start", "exec_error", "tool_call_end", "tool_result"}, h.eventKinds("b")); diff != "" {
		t.Errorf("failed call events (-want +got):\n%s", diff)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var last uint64
	results := 0
	for _, e := range h.events {
		if e.Seq <= last {
			t.Fatalf("seq not increasing: %d after %d", e.Seq, last)
		}
		last = e.Seq
		if e.Kind == EventToolResult {
			results++
		} else if results > 0 {
			t.Fatalf("%s after a tool_result", e.Kind)
		}
	}
}

func TestConfirmBoundToCallAndHash(t *testing.T) {
	h := newHarness(t, nil)
	confirms := make(chan *messages.Event, 4)
	h.mu.Lock()
	h.onEv = func(e *messages.Event) {
		if e.Kind == EventToolConfirm {
			confirms <- e
		}
	}
	h.mu.Unlock()
	tr := turn("s1", "r1", call("w1", "write", `{"path":"x"}`), call("w2", "write", `{"path":"y"}`))
	tr.Approve = ApproveAsk
	done := make(chan *messages.TurnResult, 1)
	go func() { done <- h.dispatch(tr) }()
	ctx := context.Background()

	e := <-confirms
	if e.CallId != "w1" {
		t.Fatalf("first confirmation for %s", e.CallId)
	}
	ack, err := h.d.Confirm(ctx, &messages.ConfirmReply{Session: "s1", CallId: "w1", ArgsHash: "0000", Approve: true})
	if err != nil || ack.Status != "mismatch" {
		t.Fatalf("wrong hash: %v %v", ack, err)
	}
	ack, _ = h.d.Confirm(ctx, &messages.ConfirmReply{Session: "s1", CallId: "w2", ArgsHash: e.ArgsHash, Approve: true})
	if ack.Status != "not_found" {
		t.Fatalf("approval for another call id: %v", ack)
	}
	ack, _ = h.d.Confirm(ctx, &messages.ConfirmReply{Session: "s1", CallId: "w1", ArgsHash: e.ArgsHash, Approve: true})
	if ack.Status != "accepted" {
		t.Fatalf("right answer: %v", ack)
	}
	e2 := <-confirms
	if e2.CallId != "w2" || e2.ArgsHash == e.ArgsHash {
		t.Fatalf("second confirmation %v", e2)
	}
	ack, _ = h.d.Confirm(ctx, &messages.ConfirmReply{Session: "s1", CallId: "w1", ArgsHash: e.ArgsHash, Approve: true})
	if ack.Status != "already_answered" {
		t.Fatalf("reused answer: %v", ack)
	}
	ack, _ = h.d.Confirm(ctx, &messages.ConfirmReply{Session: "s1", CallId: "w2", ArgsHash: e2.ArgsHash, Approve: false, Reason: "no"})
	if ack.Status != "accepted" {
		t.Fatalf("deny: %v", ack)
	}
	r := <-done
	if diff := cmp.Diff([]string{"w1=ok", "w2=skipped"}, statuses(r)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if h.p.count("w2") != 0 {
		t.Fatal("denied call ran")
	}
}

// loadCounter counts the sessions loaded from the store: a session actor
// loads its session once, so a second load is a new actor.
type loadCounter struct {
	cachestore.SessionStore
	loads atomic.Int32
}

func (s *loadCounter) LoadSession(ctx context.Context, session string) (cachestore.SessionState, error) {
	s.loads.Add(1)
	return s.SessionStore.LoadSession(ctx, session)
}

// TestPassivationKeepsState: a session idle for SessionIdle is passivated
// (its next turn is served by a new actor, which loads the session from the
// store again) and its state survives: the turn number goes on and the
// earlier call's result still de-duplicates. The clock is synctest's.
func TestPassivationKeepsState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		settleBubble(t)
		const idle = time.Minute
		var store *loadCounter
		h := newHarness(t, func(c *Config) {
			c.SessionIdle = idle
			store = &loadCounter{SessionStore: c.Store}
			c.Store = store
		})
		h.dispatch(turn("s1", "r1", call("a", "echo", `{"x":"1"}`)))
		if n := store.loads.Load(); n != 1 {
			t.Fatalf("session loaded %d times by its first turn, want 1", n)
		}
		time.Sleep(idle / 2)
		synctest.Wait()
		h.dispatch(turn("s1", "r1", call("b", "echo", `{"x":"2"}`)))
		if n := store.loads.Load(); n != 1 {
			t.Fatalf("session loaded %d times before it was idle for SessionIdle, want 1 (passivated too early)", n)
		}
		time.Sleep(2 * idle)
		synctest.Wait()
		r := h.dispatch(turn("s1", "r1", call("c", "echo", `{"x":"1"}`)))
		if n := store.loads.Load(); n != 2 {
			t.Fatalf("session loaded %d times after idling 2×SessionIdle, want 2: it was not passivated", n)
		}
		if r.Turn != 3 || r.Messages[0].Status != "deduped" {
			t.Fatalf("after passivation: turn %d, %v; want turn 3, deduped", r.Turn, statuses(r))
		}
	})
}

func TestTurnIDReplays(t *testing.T) {
	h := newHarness(t, nil)
	tr := turn("s1", "r1", call("w", "write", `{"path":"x"}`))
	tr.TurnId = "t-1"
	r1 := h.dispatch(tr)
	r2 := h.dispatch(tr)
	if !r2.Replayed || r2.Turn != r1.Turn || h.p.count("w") != 1 {
		t.Fatalf("replay: %+v, ran %d times", r2, h.p.count("w"))
	}
}

func TestNoDedupToolsAlwaysRun(t *testing.T) {
	h := newHarness(t, nil)
	r := h.dispatch(turn("s1", "r1", call("a", "fresh", `{"x":"1"}`), call("b", "fresh", `{"x":"1"}`)))
	r2 := h.dispatch(turn("s1", "r1", call("c", "fresh", `{"x":"1"}`)))
	if diff := cmp.Diff([]string{"a=ok", "b=ok", "c=ok"}, append(statuses(r), statuses(r2)...)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if n := h.p.count("a") + h.p.count("b") + h.p.count("c"); n != 3 {
		t.Fatalf("ran %d times, want 3", n)
	}
}
