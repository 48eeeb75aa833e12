package chaos

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/web"
)

func TestMain(m *testing.M) {
	code := buildBinary()
	if code != 0 {
		os.Exit(code)
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				code = 1
			}
		}()
		goleak.VerifyTestMain(m,
			goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
			// regexp2's match-timeout clock stops itself ~1 s after the last match.
			goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock"),
			// The stubborn tool's goroutine is abandoned on purpose until
			// the test releases it; it is checked by the tests themselves.
		)
	}()
	cleanupBinary()
	os.Exit(code)
}

// env is one dispatcher over a FaultStore wrapping an in-memory store.
type env struct {
	t        *testing.T
	d        *actors.Dispatcher
	store    *FaultStore
	counter  *Counter
	stubborn *Stubborn
	log      *Log
	mu       sync.Mutex
	events   int
}

func newEnv(t *testing.T, mod func(*actors.Config), extra ...toolkit.Tool) *env {
	t.Helper()
	e := &env{t: t, store: NewFaultStore(cachestore.NewMemory()), counter: NewCounter(), stubborn: NewStubborn(), log: &Log{}}
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	for _, tl := range append(Tools(e.stubborn, e.log), extra...) {
		reg.Register(tl)
	}
	cfg := actors.Config{Registry: reg, Store: e.store, Observer: e.counter, MaxConcurrency: 3,
		WatchdogGrace: 100 * time.Millisecond, CancelGrace: 100 * time.Millisecond,
		Events: func(*messages.Event) { e.mu.Lock(); e.events++; e.mu.Unlock() }}
	if mod != nil {
		mod(&cfg)
	}
	d, err := actors.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.d = d
	t.Cleanup(func() {
		select {
		case <-e.stubborn.Release:
		default:
			close(e.stubborn.Release)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			t.Error(err)
		}
		_ = e.store.Close()
		// The released stubborn goroutines end promptly.
		deadline := time.Now().Add(5 * time.Second)
		for e.stubborn.Running.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	})
	return e
}

func call(id, name, args string) *messages.ToolCall {
	return &messages.ToolCall{Id: id, Type: "function", Function: &messages.FunctionCall{Name: name, Arguments: args}}
}

func turn(session string, calls ...*messages.ToolCall) *messages.DispatchTurn {
	return &messages.DispatchTurn{Session: session, Run: "r", Provider: toolkit.ProviderClaudeCode, Approve: actors.ApproveAll,
		AutoLoadSchemas: true, Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: calls}}
}

func (e *env) dispatch(tr *messages.DispatchTurn, within time.Duration) (*messages.TurnResult, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return e.d.Dispatch(ctx, tr)
}

func (e *env) mustDispatch(tr *messages.DispatchTurn, within time.Duration) *messages.TurnResult {
	e.t.Helper()
	start := time.Now()
	r, err := e.dispatch(tr, within)
	if err != nil {
		e.t.Fatalf("dispatch: %v (after %v)", err, time.Since(start))
	}
	checkOneResultEach(e.t, tr, r)
	return r
}

// checkOneResultEach: one tool message per call, in call order.
func checkOneResultEach(t *testing.T, tr *messages.DispatchTurn, r *messages.TurnResult) {
	t.Helper()
	calls := tr.Message.ToolCalls
	if len(r.Messages) != len(calls) {
		t.Fatalf("%d results for %d calls: %v", len(r.Messages), len(calls), r.Messages)
	}
	for i, m := range r.Messages {
		if want := strings.TrimSpace(calls[i].Id); want != "" && m.ToolCallId != want {
			t.Fatalf("result %d is for %q, want %q", i, m.ToolCallId, want)
		}
	}
}

func statuses(r *messages.TurnResult) map[string]string {
	m := map[string]string{}
	for _, tm := range r.Messages {
		m[tm.ToolCallId] = tm.Status
	}
	return m
}

func wantStatuses(t *testing.T, r *messages.TurnResult, want map[string]string) {
	t.Helper()
	got := statuses(r)
	for id, st := range want {
		if got[id] != st {
			t.Errorf("%s = %q, want %q (all: %v)", id, got[id], st, got)
		}
	}
}

func (e *env) committedTurns(session string) []*messages.TurnRecord {
	e.t.Helper()
	recs, err := e.store.Turns(context.Background(), session)
	if err != nil {
		e.t.Fatal(err)
	}
	return recs
}

// TestFaultToolPanics: a panicking tool becomes an error result for that
// call only; its siblings run; the next turn works.
func TestFaultToolPanics(t *testing.T) {
	e := newEnv(t, nil)
	r := e.mustDispatch(turn("s", call("p", "panic", `{}`), call("a", "echo", `{"x":"1"}`), call("p2", "panic", `{"n":2}`)), 10*time.Second)
	wantStatuses(t, r, map[string]string{"p": "error", "a": "ok", "p2": "error"})
	if !strings.Contains(r.Messages[0].Content, "injected tool panic") {
		t.Errorf("panic text missing: %q", r.Messages[0].Content)
	}
	r = e.mustDispatch(turn("s", call("b", "echo", `{"x":"2"}`)), 10*time.Second)
	wantStatuses(t, r, map[string]string{"b": "ok"})
}

// TestFaultToolHangs: a tool that waits for its context gets timeout at its
// own timeout; its siblings are not cancelled.
func TestFaultToolHangs(t *testing.T) {
	e := newEnv(t, nil)
	start := time.Now()
	r := e.mustDispatch(turn("s", call("h", "hang", `{}`), call("a", "echo", `{}`)), 10*time.Second)
	wantStatuses(t, r, map[string]string{"h": "timeout", "a": "ok"})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("turn took %v", d)
	}
}

// TestFaultToolIgnoresCancellation: a tool that ignores its context is
// abandoned at timeout + WatchdogGrace: its slot is freed (later calls run
// under a limit of 1), it reports timeout, and the leak is counted by
// actors.AbandonedCalls and the Observer (the service's
// tooldispatch_abandoned_calls_total metric).
func TestFaultToolIgnoresCancellation(t *testing.T) {
	e := newEnv(t, func(c *actors.Config) { c.MaxConcurrency = 1 })
	total0, running0 := actors.AbandonedCalls()
	start := time.Now()
	r := e.mustDispatch(turn("s", call("s1", "stubborn", `{}`), call("a", "echo", `{"x":"a"}`), call("s2", "stubborn", `{"n":2}`), call("b", "echo", `{"x":"b"}`)), 10*time.Second)
	wantStatuses(t, r, map[string]string{"s1": "timeout", "a": "ok", "s2": "timeout", "b": "ok"})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("turn took %v; abandoned calls should free their slot at timeout+grace", d)
	}
	total, running := actors.AbandonedCalls()
	if total-total0 != 2 || running < 2 {
		t.Errorf("AbandonedCalls = (%d, %d) (total before %d), want 2 more and at least 2 running", total, running, total0)
	}
	if n := e.counter.AbandonedOf("stubborn"); n != 2 {
		t.Errorf("observer saw %d abandoned stubborn calls, want 2", n)
	}
	if n := e.stubborn.Running.Load(); n != 2 {
		t.Errorf("%d stubborn goroutines still running, want 2 (the leak being counted)", n)
	}
	close(e.stubborn.Release)
	deadline := time.Now().Add(5 * time.Second)
	for e.stubborn.Running.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := e.stubborn.Running.Load(); n != 0 {
		t.Fatalf("released stubborn goroutines still running: %d", n)
	}
	// The late results did not replace the committed timeout.
	recs := e.committedTurns("s")
	if st := recs[0].ToolMessages[0].Status; st != "timeout" {
		t.Errorf("committed status of s1 = %q after the late return", st)
	}
	r = e.mustDispatch(turn("s", call("c", "echo", `{"x":"c"}`)), 10*time.Second)
	wantStatuses(t, r, map[string]string{"c": "ok"})
	_ = running0
}

// TestAbandonedGaugeAfterTurn (finding F2): once an abandoned call
// finally returns, actors.AbandonedCalls' running count must drop back, even
// when its turn has already ended.
func TestAbandonedGaugeAfterTurn(t *testing.T) {
	e := newEnv(t, func(c *actors.Config) { c.MaxConcurrency = 1 })
	_, running0 := actors.AbandonedCalls()
	r := e.mustDispatch(turn("s", call("s1", "stubborn", `{}`), call("a", "echo", `{}`)), 10*time.Second)
	wantStatuses(t, r, map[string]string{"s1": "timeout", "a": "ok"})
	_, during := actors.AbandonedCalls()
	close(e.stubborn.Release)
	deadline := time.Now().Add(3 * time.Second)
	for {
		_, running := actors.AbandonedCalls()
		if running == running0 && e.stubborn.Running.Load() == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("abandoned call returned (goroutines running: %d) but AbandonedCalls running = %d, want %d (was %d while abandoned)",
				e.stubborn.Running.Load(), running, running0, during)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFaultToolFloodsOutput: a tool that streams 8 MiB in 8192 events and
// returns 8 MiB does not stall the turn or its siblings.
func TestFaultToolFloodsOutput(t *testing.T) {
	e := newEnv(t, nil)
	start := time.Now()
	r := e.mustDispatch(turn("s", call("f", "flood", `{"n":8192}`), call("a", "echo", `{}`)), 30*time.Second)
	wantStatuses(t, r, map[string]string{"f": "ok", "a": "ok"})
	t.Logf("flood turn: %v, %d events, result %d bytes", time.Since(start), e.events, len(r.Messages[0].Content))
	r = e.mustDispatch(turn("s", call("b", "echo", `{"x":"b"}`)), 10*time.Second)
	wantStatuses(t, r, map[string]string{"b": "ok"})
}

// TestFaultStoreFailsOnWrite: while the store refuses writes, a turn
// reports an infrastructure error and nothing of it is written, its
// mutating calls do not run; once the store recovers the next turn works
// and gets the next turn number.
func TestFaultStoreFailsOnWrite(t *testing.T) {
	for _, mode := range []string{"all writes", "commit only"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, nil)
			e.mustDispatch(turn("s", call("a", "echo", `{"x":"a"}`)), 10*time.Second)
			if mode == "all writes" {
				e.store.FailWrites.Store(true)
			} else {
				e.store.FailCommits.Store(true)
			}
			r, err := e.dispatch(turn("s", call("n1", "note", `{}`), call("b", "echo", `{"x":"b"}`)), 10*time.Second)
			if err == nil {
				t.Fatalf("a turn whose write failed reported no error: %v", r)
			}
			t.Logf("failed turn: %v", err)
			if got := len(e.committedTurns("s")); got != 1 {
				t.Fatalf("%d turns committed after the failed write, want 1", got)
			}
			if mode == "all writes" && len(e.log.IDs()) != 0 {
				t.Errorf("mutating call ran although its intent could not be written: %v", e.log.IDs())
			}
			e.store.FailWrites.Store(false)
			e.store.FailCommits.Store(false)
			r = e.mustDispatch(turn("s", call("c", "echo", `{"x":"c"}`), call("n2", "note", `{}`)), 10*time.Second)
			wantStatuses(t, r, map[string]string{"c": "ok", "n2": "ok"})
			recs := e.committedTurns("s")
			// All writes failed: nothing of turn 2 exists. Commit failed
			// after the intent was written: turn 2 is resolved from its
			// intent (calls that may have started read outcome_unknown,
			// the rest canceled), whole, before turn 3.
			wantTurns := map[string]int{"all writes": 2, "commit only": 3}[mode]
			if len(recs) != wantTurns {
				t.Fatalf("after recovery: %d turns, numbers %v, want %d", len(recs), turnNumbers(recs), wantTurns)
			}
			for i, rec := range recs {
				if rec.Turn != int64(i+1) {
					t.Errorf("turn numbers %v", turnNumbers(recs))
				}
			}
			if mode == "commit only" {
				for _, m := range recs[1].ToolMessages {
					t.Logf("resolved turn 2: %s %s", m.ToolCallId, m.Status)
					if m.Status != "outcome_unknown" && m.Status != "canceled" {
						t.Errorf("resolved call %s = %s", m.ToolCallId, m.Status)
					}
				}
			}
			for _, rec := range recs {
				if len(rec.ToolMessages) != len(rec.Assistant.ToolCalls) {
					t.Errorf("turn %d half-written: %d tool messages for %d calls", rec.Turn, len(rec.ToolMessages), len(rec.Assistant.ToolCalls))
				}
			}
		})
	}
}

func turnNumbers(recs []*messages.TurnRecord) []int64 {
	var n []int64
	for _, r := range recs {
		n = append(n, r.Turn)
	}
	return n
}

// TestFaultStoreStallsOnWrite: a commit that stalls 1 s delays the turn's
// results (they follow the durable write) but loses nothing; a turn whose
// caller gives up during the stall gets an error, and the session works
// afterwards.
func TestFaultStoreStallsOnWrite(t *testing.T) {
	e := newEnv(t, nil)
	e.store.StallNanos.Store(int64(time.Second))
	start := time.Now()
	r := e.mustDispatch(turn("s", call("a", "echo", `{"x":"a"}`)), 20*time.Second)
	if d := time.Since(start); d < time.Second {
		t.Errorf("results came %v after start, before the stalled write ended", d)
	}
	wantStatuses(t, r, map[string]string{"a": "ok"})
	// A caller that gives up during a stall.
	start = time.Now()
	r, err := e.dispatch(turn("s", call("b", "echo", `{"x":"b"}`)), 300*time.Millisecond)
	t.Logf("caller giving up during a stall: after %v: err=%v result=%v", time.Since(start), err, r)
	if err == nil && time.Since(start) < time.Second {
		t.Fatalf("dispatch returned a result %v after %v, before the stalled commit ended", r, time.Since(start))
	}
	e.store.StallNanos.Store(0)
	r = e.mustDispatch(turn("s", call("c", "echo", `{"x":"c"}`)), 20*time.Second)
	wantStatuses(t, r, map[string]string{"c": "ok"})
	recs := e.committedTurns("s")
	// The abandoned turn either committed (its write went on) or not; every
	// committed turn is whole and numbered without gaps.
	for i, rec := range recs {
		if rec.Turn != int64(i+1) || len(rec.ToolMessages) != len(rec.Assistant.ToolCalls) {
			t.Errorf("turn %d: number %d, %d messages for %d calls", i, rec.Turn, len(rec.ToolMessages), len(rec.Assistant.ToolCalls))
		}
	}
}

// TestFaultCommitActorCrash (finding F1): CommitTurn panics once mid-turn.
// The commit actor is restarted by its session; the turn must get exactly
// one reply (an infrastructure error or a result) promptly, and the next
// turn works. Today the reply comes only after the 2-minute store timeout.
func TestFaultCommitActorCrash(t *testing.T) {
	e := newEnv(t, nil)
	e.mustDispatch(turn("s", call("a", "echo", `{"x":"a"}`)), 10*time.Second)
	e.store.PanicCommits.Store(1)
	start := time.Now()
	r, err := e.dispatch(turn("s", call("n1", "note", `{}`), call("b", "echo", `{"x":"b"}`)), 150*time.Second)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the turn whose commit panicked got its reply after %v (err=%v), want within 10s", d, err)
	}
	if err == nil {
		checkOneResultEach(t, turn("s", call("n1", "note", `{}`), call("b", "echo", `{"x":"b"}`)), r)
	}
	if err != nil && strings.Contains(err.Error(), "deadline") {
		t.Fatalf("the crashed commit left the turn without a reply: %v", err)
	}
	t.Logf("turn during the crash: err=%v", err)
	if e.store.Panics.Load() != 1 {
		t.Fatalf("CommitTurn panicked %d times", e.store.Panics.Load())
	}
	r = e.mustDispatch(turn("s", call("c", "echo", `{"x":"c"}`)), 10*time.Second)
	wantStatuses(t, r, map[string]string{"c": "ok"})
	recs := e.committedTurns("s")
	for i, rec := range recs {
		if rec.Turn != int64(i+1) || len(rec.ToolMessages) != len(rec.Assistant.ToolCalls) {
			t.Errorf("turn %d: number %d, %d messages for %d calls", i, rec.Turn, len(rec.ToolMessages), len(rec.Assistant.ToolCalls))
		}
	}
	if n := len(e.log.IDs()); n > 1 {
		t.Errorf("note ran %d times", n)
	}
}

// TestFaultHTTPUpstream: a slow upstream, one that resets the connection,
// and one that stalls mid-body each end that call with a clear status;
// sibling calls are untouched.
func TestFaultHTTPUpstream(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("fine")) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/reset", func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST instead of FIN
			}
			conn.Close()
		}
	})
	mux.HandleFunc("/stall-body", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		_, _ = w.Write([]byte(strings.Repeat("a", 1000)))
		w.(http.Flusher).Flush()
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	wb, err := web.New(web.Deps{Config: web.Config{AllowLoopback: true, Timeout: 500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Close()
	e := newEnv(t, nil, wb.Tools()...)
	u := func(p string) string { return `{"url":"` + srv.URL + p + `"}` }
	start := time.Now()
	r := e.mustDispatch(turn("s",
		call("ok", "http_request", u("/ok")),
		call("slow", "http_request", u("/slow")),
		call("reset", "http_request", u("/reset")),
		call("stall", "http_request", u("/stall-body")),
		call("a", "echo", `{}`)), 30*time.Second)
	for _, m := range r.Messages {
		t.Logf("%s: %s: %.120q", m.ToolCallId, m.Status, m.Content)
	}
	got := statuses(r)
	if got["ok"] != "ok" || got["a"] != "ok" {
		t.Errorf("healthy calls hurt: %v", got)
	}
	for _, id := range []string{"slow", "reset", "stall"} {
		if got[id] != "error" && got[id] != "timeout" {
			t.Errorf("%s: status %q, want error or timeout", id, got[id])
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("turn took %v", d)
	}
}
