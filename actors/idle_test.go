package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// reloadCounter counts the loads of sessions and runs.
type reloadCounter struct {
	cachestore.SessionStore
	sessions, runs atomic.Int32
	failRuns       atomic.Int32 // so many run loads fail
}

func (s *reloadCounter) LoadSession(ctx context.Context, session string) (cachestore.SessionState, error) {
	s.sessions.Add(1)
	return s.SessionStore.LoadSession(ctx, session)
}

func (s *reloadCounter) LoadRun(ctx context.Context, session, run string) (*cachestore.RunState, error) {
	s.runs.Add(1)
	if s.failRuns.Add(-1) >= 0 {
		return nil, errors.New("test: loading the run failed")
	}
	return s.SessionStore.LoadRun(ctx, session, run)
}

// localProcesses counts the processes (actors, futures) registered in sys.
func localProcesses(sys *actor.ActorSystem) int {
	n := 0
	for _, m := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		n += m.Count()
	}
	return n
}

// TestIdleSessionsHoldNoActors: a session without work is data, not
// actors. After n sessions have each committed a turn, the actor system
// holds as many processes as before the first turn; the next turn of each
// session goes on from the state kept for it (turn 2, the earlier result
// de-duplicates) without loading the session or its run again. The clock
// and the "all actors are done" point are synctest's.
func TestIdleSessionsHoldNoActors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 20
		var store *reloadCounter
		h := newHarness(t, func(c *Config) {
			c.SessionIdle = time.Hour
			store = &reloadCounter{SessionStore: c.Store}
			c.Store = store
		})
		synctest.Wait()
		base := localProcesses(h.d.system)
		for i := range n {
			r := h.dispatch(turn(fmt.Sprintf("s%d", i), "r1", call("a", "echo", `{"x":"1"}`)))
			if r.Turn != 1 || r.Messages[0].Status != "ok" {
				t.Fatalf("session %d: turn %d, %v; want turn 1, ok", i, r.Turn, statuses(r))
			}
		}
		synctest.Wait()
		if got := localProcesses(h.d.system); got != base {
			t.Fatalf("%d processes registered after %d sessions went idle, %d before their turns: an idle session holds %.1f actors",
				got, n, base, float64(got-base)/n)
		}
		for i := range n {
			r := h.dispatch(turn(fmt.Sprintf("s%d", i), "r1", call("b", "echo", `{"x":"1"}`)))
			if r.Turn != 2 || r.Messages[0].Status != "deduped" {
				t.Fatalf("session %d, second turn: turn %d, %v; want turn 2, deduped", i, r.Turn, statuses(r))
			}
		}
		// No run load: a session with no committed turn when it was
		// loaded has no run state in the store; a reload would find turn
		// 1 committed and read the run.
		if s, r := store.sessions.Load(), store.runs.Load(); s != n || r != 0 {
			t.Fatalf("%d session loads and %d run loads for %d sessions of two turns each, want %d and 0: the idle state was not kept",
				s, r, n, n)
		}
		synctest.Wait()
		if got := localProcesses(h.d.system); got != base {
			t.Fatalf("%d processes registered after the second turns, %d before", got, base)
		}
	})
}

func TestRunTable(t *testing.T) {
	a, b, c := &cachestore.RunState{}, &cachestore.RunState{}, &cachestore.RunState{}
	var rt runTable
	rt.put("a", a)
	rt.put("b", b)
	if rt.get("a") != a || rt.get("b") != b || rt.get("c") != nil {
		t.Fatal("two runs: a lookup found the wrong state")
	}
	rt.del("a")
	if rt.get("a") != nil || rt.get("b") != b {
		t.Fatal("after deleting the inline run: a lookup found the wrong state")
	}
	rt.put("c", c)
	rt.put("b", a)
	if rt.get("c") != c || rt.get("b") != a {
		t.Fatal("after reusing the inline slot and replacing a run: a lookup found the wrong state")
	}
	rt.del("b")
	rt.del("c")
	if rt.get("b") != nil || rt.get("c") != nil || rt.rs != nil || len(rt.more) != 0 {
		t.Fatalf("after deleting every run: %+v", rt)
	}
}

// TestRunTableCompact: an idle session's small run is kept in slices and
// comes back as the same state; a large one stays as it is.
func TestRunTableCompact(t *testing.T) {
	small := &cachestore.RunState{
		Dedup:   map[string]*cachestore.DedupEntry{"k1": {Key: "k1", Tool: "echo", Content: "one"}, "k2": {Key: "k2", Tool: "echo", Content: "two"}},
		Fetched: map[string]bool{"echo": true},
	}
	want := &cachestore.RunState{Dedup: map[string]*cachestore.DedupEntry{}, Fetched: map[string]bool{}}
	for k, e := range small.Dedup {
		c := *e
		want.Dedup[k] = &c
	}
	for n := range small.Fetched {
		want.Fetched[n] = true
	}
	var rt runTable
	rt.put("r", small)
	rt.shrink()
	if !rt.compact || rt.rs != nil || len(rt.dedup) != 2 || len(rt.fetched) != 1 {
		t.Fatalf("a small run was not made compact: %+v", rt)
	}
	if rt.get("other") != nil {
		t.Fatal("a lookup of another run found the compact one")
	}
	if diff := cmp.Diff(want, rt.get("r")); diff != "" {
		t.Fatalf("the compact run came back different (-want +got):\n%s", diff)
	}
	if rt.compact {
		t.Fatal("still compact after a lookup")
	}

	rt.shrink()
	rt.del("r")
	if rt.get("r") != nil || rt.compact {
		t.Fatalf("a deleted compact run is still there: %+v", rt)
	}
	rt.put("a", small)
	rt.shrink()
	other := &cachestore.RunState{}
	rt.put("b", other)
	if rt.get("b") != other || rt.get("a") == nil {
		t.Fatalf("a second run beside a compact one: %+v", rt)
	}

	big := &cachestore.RunState{Dedup: map[string]*cachestore.DedupEntry{}, Fetched: map[string]bool{}}
	for i := range compactRunMax + 1 {
		k := fmt.Sprint(i)
		big.Dedup[k] = &cachestore.DedupEntry{Key: k}
	}
	rt = runTable{}
	rt.put("r", big)
	rt.shrink()
	if rt.compact || rt.get("r") != big {
		t.Fatal("a run with more than compactRunMax entries was made compact")
	}
}

// TestFailedTurnDropsKeptState: a turn that fails (here its run cannot be
// loaded) may leave the commit actor's cache stale, so the session's next
// activation loads the session from the store again instead of taking the
// record the dispatcher kept; after a good turn the record is kept.
func TestFailedTurnDropsKeptState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var store *reloadCounter
		h := newHarness(t, func(c *Config) {
			c.SessionIdle = time.Hour
			// A committed turn: the session's run is read from the store.
			if err := c.Store.CommitTurn(context.Background(), &cachestore.TurnCommit{Session: "s1",
				Record: &messages.TurnRecord{Run: "r1", Turn: 1}}); err != nil {
				t.Fatal(err)
			}
			store = &reloadCounter{SessionStore: c.Store}
			c.Store = store
		})
		base := localProcesses(h.d.system)
		store.failRuns.Store(1)
		if r, err := h.d.Dispatch(context.Background(), turn("s1", "r1", call("a", "echo", `{"x":"1"}`))); err == nil {
			t.Fatalf("the turn whose run cannot be loaded did not fail: %v", statuses(r))
		}
		synctest.Wait()
		if got := localProcesses(h.d.system); got != base {
			t.Fatalf("%d processes after the failed turn, %d before: the session did not go idle", got, base)
		}
		h.dispatch(turn("s1", "r1", call("b", "echo", `{"x":"2"}`)))
		if n := store.sessions.Load(); n != 2 {
			t.Fatalf("session loaded %d times, want 2: the state kept after a failed turn was not dropped", n)
		}
		synctest.Wait()
		h.dispatch(turn("s1", "r1", call("c", "echo", `{"x":"3"}`)))
		if n := store.sessions.Load(); n != 2 {
			t.Fatalf("session loaded %d times after a good turn, want 2: the state was not kept", n)
		}
		synctest.Wait()
	})
}

// TestAnswerAfterTheSessionWentIdle: a second answer to a question that was
// answered reads ErrAlreadyAnswered also once its session has gone idle
// (no session actor to deliver it to), and an answer to a question never
// asked reads ErrNoPending.
func TestAnswerAfterTheSessionWentIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(c *Config) {
			c.SessionIdle = time.Hour
			c.Registry.Register(toolkit.Tool{Name: "ask", Description: "Asks the human.", Schema: json.RawMessage(objSchema),
				ReadOnly: true, Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
					a, err := c.Ask(ctx, toolkit.Question{Text: "which?"})
					if err != nil {
						return toolkit.Result{}, err
					}
					return toolkit.Result{Content: "answer " + a.Text}, nil
				}})
		})
		base := localProcesses(h.d.system)
		answered := make(chan error, 1)
		h.onEv = func(e *messages.Event) {
			if e.Kind == toolkit.QuestionText && e.CallId == "q1" {
				go func() { answered <- h.d.Answer(context.Background(), e.Session, e.CallId, "blue", false) }()
			}
		}
		if r := h.dispatch(turn("s1", "r", call("q1", "ask", `{}`))); r.Messages[0].Content != "answer blue" {
			t.Fatalf("asked turn: %v", r.Messages[0])
		}
		if err := <-answered; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := localProcesses(h.d.system); got != base {
			t.Fatalf("%d processes after the turn, %d before: the session did not go idle", got, base)
		}
		if err := h.d.Answer(context.Background(), "s1", "q1", "red", false); err != ErrAlreadyAnswered {
			t.Fatalf("second answer after the session went idle: %v, want %v", err, ErrAlreadyAnswered)
		}
		if err := h.d.Answer(context.Background(), "s1", "nope", "red", false); err != ErrNoPending {
			t.Fatalf("answer to a question never asked: %v, want %v", err, ErrNoPending)
		}
		synctest.Wait()
	})
}

// TestNewSessionReadsNoRun: a session with no committed turn has no run
// state in the store, so its turns read none (one store read for a new
// session's first turn); its runs still de-duplicate within the session.
// A session with a committed turn in the store reads its run.
func TestNewSessionReadsNoRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var store *reloadCounter
		h := newHarness(t, func(c *Config) {
			c.SessionIdle = time.Hour
			if err := c.Store.CommitTurn(context.Background(), &cachestore.TurnCommit{Session: "old",
				Record: &messages.TurnRecord{Run: "r1", Turn: 1}}); err != nil {
				t.Fatal(err)
			}
			store = &reloadCounter{SessionStore: c.Store}
			c.Store = store
		})
		if r := h.dispatch(turn("new", "r1", call("a", "echo", `{"x":"1"}`))); r.Turn != 1 || r.Messages[0].Status != "ok" {
			t.Fatalf("first turn: turn %d, %v; want turn 1, ok", r.Turn, statuses(r))
		}
		if r := h.dispatch(turn("new", "r1", call("b", "echo", `{"x":"1"}`))); r.Turn != 2 || r.Messages[0].Status != "deduped" {
			t.Fatalf("second turn, same run: turn %d, %v; want turn 2, deduped", r.Turn, statuses(r))
		}
		if r := h.dispatch(turn("new", "r2", call("c", "echo", `{"x":"1"}`))); r.Turn != 3 || r.Messages[0].Status != "ok" {
			t.Fatalf("third turn, another run: turn %d, %v; want turn 3, ok", r.Turn, statuses(r))
		}
		if n := store.runs.Load(); n != 0 {
			t.Fatalf("%d run loads for a session that had no committed turn, want 0", n)
		}
		if r := h.dispatch(turn("old", "r1", call("d", "echo", `{"x":"1"}`))); r.Turn != 2 || r.Messages[0].Status != "ok" {
			t.Fatalf("session with a committed turn: turn %d, %v; want turn 2, ok", r.Turn, statuses(r))
		}
		if n := store.runs.Load(); n != 1 {
			t.Fatalf("%d run loads after a turn of a session with a committed turn, want 1", n)
		}
		synctest.Wait()
	})
}

// TestAnswerAfterIdleIsTraced: an answer for a session that went idle is
// settled by the dispatcher itself (already answered), and its delivery is
// traced like one the session's actor settles.
func TestAnswerAfterIdleIsTraced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		h := newHarness(t, func(c *Config) {
			c.Tracer = tp.Tracer("test")
			c.SessionIdle = time.Hour
			c.Registry.Register(toolkit.Tool{Name: "ask", Description: "Asks the human.", Schema: json.RawMessage(objSchema),
				ReadOnly: true, Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
					a, err := c.Ask(ctx, toolkit.Question{Text: "which?"})
					if err != nil {
						return toolkit.Result{}, err
					}
					return toolkit.Result{Content: "answer " + a.Text}, nil
				}})
		})
		base := localProcesses(h.d.system)
		h.onEv = func(e *messages.Event) {
			if e.Kind == toolkit.QuestionText && e.CallId == "q1" {
				go func() { _ = h.d.Answer(context.Background(), e.Session, e.CallId, "blue", false) }()
			}
		}
		if r := h.dispatch(turn("s1", "r", call("q1", "ask", `{}`))); r.Messages[0].Content != "answer blue" {
			t.Fatalf("asked turn: %v", r.Messages[0])
		}
		synctest.Wait()
		if got := localProcesses(h.d.system); got != base {
			t.Fatalf("%d processes after the turn, %d before: the session did not go idle", got, base)
		}
		ctx, _ := callerContext(t)
		if err := h.d.Answer(ctx, "s1", "q1", "red", false); err != ErrAlreadyAnswered {
			t.Fatalf("second answer after the session went idle: %v, want %v", err, ErrAlreadyAnswered)
		}
		var answer sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == spanAnswer {
				answer = s
			}
		}
		if answer == nil {
			t.Fatal("no answer span")
		}
		for _, s := range rec.Ended() {
			if s.Name() == spanDeliver && s.Parent().SpanID() == answer.SpanContext().SpanID() {
				for _, a := range s.Attributes() {
					if string(a.Key) == "error.type" && a.Value.AsString() == "already_answered" {
						return
					}
				}
				t.Fatalf("the delivery of the refused answer has attributes %v", s.Attributes())
			}
		}
		t.Fatal("the refused answer has no delivery span: the dispatcher settled it untraced")
	})
}
