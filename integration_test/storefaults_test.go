package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/cachestore/faults"
	"github.com/tooldispatch/tooldispatch/cachestore/postgres"
	"github.com/tooldispatch/tooldispatch/cachestore/seam"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/web"
)

// Storage faults through the store's seam (cachestore/faults wrapping the
// real store), for Badger on disk, PostgreSQL and Memory alike: a write that
// fails before anything is written, a full disk, a write applied and then
// reported failed (a failing fsync), a stall, a failing read; for intents,
// commits, deferred approvals and the cache. Each case checks that the
// turn gets a clear error, that no session is left half-written, that the
// next turn works once the store does, and that a restart recovers: every
// committed call has exactly one result, turns are numbered without gaps,
// and no call ran twice.

// faultStores are the stores the faults are injected into. open returns a
// store and a restart that closes it and opens it again as a new process
// would.
var faultStores = []struct {
	name string
	open func(t *testing.T) (cachestore.Store, func() cachestore.Store)
}{
	{"badger", openBadgerForFaults},
	{"postgres", openPostgresForFaults},
	{"memory", func(*testing.T) (cachestore.Store, func() cachestore.Store) {
		m := cachestore.NewMemory()
		// A new process over the same data: what Memory keeps is what a
		// reopened store reads.
		return m, func() cachestore.Store { _, _ = m.RecoverAll(context.Background()); return m }
	}},
}

func openBadgerForFaults(t *testing.T) (cachestore.Store, func() cachestore.Store) {
	dir := t.TempDir()
	open := func() cachestore.Store {
		t.Helper()
		s, err := badger.Open(badger.TestOptions(dir))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	t.Cleanup(func() { _ = s.Close() })
	return s, func() cachestore.Store {
		if err := s.Close(); err != nil {
			t.Fatalf("closing Badger: %v", err)
		}
		s = open()
		if _, err := s.RecoverAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	}
}

var pgFaultServer struct {
	once sync.Once
	url  string
	skip string
}

var pgFaultSchemas atomic.Int64

func openPostgresForFaults(t *testing.T) (cachestore.Store, func() cachestore.Store) {
	pgFaultServer.once.Do(func() {
		if os.Getenv("TOOLDISPATCH_PG_URL") == "skip" {
			pgFaultServer.skip = "TOOLDISPATCH_PG_URL=skip"
			return
		}
		pgFaultServer.url = sharedPGServer()
		if pgFaultServer.url == "" {
			pgFaultServer.skip = "PostgreSQL not installed: .ci/run installs the postgresql package"
		}
	})
	if pgFaultServer.skip != "" {
		t.Skip(pgFaultServer.skip)
	}
	base := pgFaultServer.url
	name := fmt.Sprintf("faults_%d_%d", os.Getpid(), pgFaultSchemas.Add(1))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	url := base + "?search_path=" + name
	if strings.Contains(base, "?") {
		url = base + "&search_path=" + name
	}
	open := func() cachestore.Store {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, err := postgres.Open(ctx, postgres.Options{URL: url, Logger: zerolog.Nop(), MaxConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	s := open()
	t.Cleanup(func() { _ = s.Close() })
	return s, func() cachestore.Store {
		if err := s.Close(); err != nil {
			t.Fatalf("closing PostgreSQL: %v", err)
		}
		s = open()
		if _, err := s.RecoverAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// sharedPGServer starts one throwaway PostgreSQL for the package's storage
// fault tests ("" when PostgreSQL is not installed); the script's watcher
// stops it when the test binary exits.
func sharedPGServer() string {
	if url := os.Getenv("TOOLDISPATCH_PG_URL"); url != "" {
		return url
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl"); len(m) == 0 {
		return ""
	}
	out, err := exec.Command("../scripts/pg-test-server.sh", "start", "--watch", fmt.Sprint(os.Getpid())).Output()
	if err != nil {
		panic(fmt.Sprintf("starting PostgreSQL: %v", err))
	}
	return strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
}

// faultNode is one process: a dispatcher over the injector wrapping the
// store.
type faultNode struct {
	t     *testing.T
	store cachestore.Store // the real store
	inj   *faults.Injector
	d     *actors.Dispatcher
	ran   *ranLog

	// The loopback page fetch_page reads, and how often it was fetched.
	webURL  string
	webHits *atomic.Int64

	mu      sync.Mutex
	results map[string]chan *messages.Event // tool_result events by call id
}

// ranLog counts executions of the mutating tool by call id (ranID).
type ranLog struct {
	mu sync.Mutex
	n  map[string]int
}

// ranID names a call in the ranLog: its id in session s, "session/id"
// in the others.
func ranID(session, id string) string {
	if session == "s" {
		return id
	}
	return session + "/" + id
}

func (l *ranLog) add(id string) {
	l.mu.Lock()
	l.n[id]++
	l.mu.Unlock()
}

func (l *ranLog) count(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[id]
}

func (l *ranLog) all() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.n {
		out[k] = v
	}
	return out
}

const faultSchema = `{"type":"object","properties":{"x":{"type":"string"},"url":{"type":"string"}},"additionalProperties":false}`

func newFaultNode(t *testing.T, s cachestore.Store, ran *ranLog, webDeps *web.Deps, mods ...func(*actors.Config)) *faultNode {
	t.Helper()
	n := &faultNode{t: t, store: s, inj: faults.New(), ran: ran, results: map[string]chan *messages.Event{}}
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	reg.Register(toolkit.Tool{Name: "echo", Description: "Echoes.", Schema: []byte(faultSchema), Concurrent: true, ReadOnly: true,
		Handler: func(_ context.Context, c *toolkit.Call) (toolkit.Result, error) {
			return toolkit.Result{Content: "echo " + string(c.Args.Canonical)}, nil
		}})
	reg.Register(toolkit.Tool{Name: "note", Description: "Records that it ran (mutating).", Schema: []byte(faultSchema), NoDedup: true,
		Handler: func(_ context.Context, c *toolkit.Call) (toolkit.Result, error) {
			ran.add(ranID(c.Session, c.ID))
			return toolkit.Result{Content: "noted " + c.ID}, nil
		}})
	wrapped := n.inj.Wrap(s)
	if webDeps != nil {
		deps := *webDeps
		deps.Cache = web.CacheFromStore(wrapped)
		w, err := web.New(deps)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range w.Tools() {
			reg.Register(tl)
		}
		t.Cleanup(w.Close)
	}
	cfg := actors.Config{Registry: reg, Store: wrapped, MaxConcurrency: 3,
		WatchdogGrace: 100 * time.Millisecond, CancelGrace: 100 * time.Millisecond,
		Events: func(e *messages.Event) {
			if e.Kind != actors.EventToolResult {
				return
			}
			n.resultChan(e.CallId) <- e
		}}
	for _, mod := range mods {
		mod(&cfg)
	}
	d, err := actors.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.d = d
	return n
}

func (n *faultNode) resultChan(id string) chan *messages.Event {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.results[id]
	if c == nil {
		c = make(chan *messages.Event, 8)
		n.results[id] = c
	}
	return c
}

// close stops the dispatcher, releasing what is stalled first.
func (n *faultNode) close() {
	n.inj.Clear()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.d.Close(ctx); err != nil {
		n.t.Errorf("closing the dispatcher: %v", err)
	}
}

func faultCall(id, name, args string) *messages.ToolCall {
	return &messages.ToolCall{Id: id, Type: "function", Function: &messages.FunctionCall{Name: name, Arguments: args}}
}

func faultTurn(calls ...*messages.ToolCall) *messages.DispatchTurn {
	return &messages.DispatchTurn{Session: "s", Run: "r", Provider: toolkit.ProviderClaudeCode, Approve: actors.ApproveAll,
		AutoLoadSchemas: true, Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: calls}}
}

func (n *faultNode) dispatch(tr *messages.DispatchTurn) (*messages.TurnResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return n.d.Dispatch(ctx, tr)
}

// mustTurn dispatches a turn that must work and checks one result per call.
func (n *faultNode) mustTurn(tr *messages.DispatchTurn, want ...string) *messages.TurnResult {
	n.t.Helper()
	r, err := n.dispatch(tr)
	if err != nil {
		n.t.Fatalf("a turn once the store works again: %v", err)
	}
	got := make([]string, len(r.Messages))
	for i, m := range r.Messages {
		got[i] = m.ToolCallId + "=" + m.Status
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		n.t.Fatalf("results %v, want %v", got, want)
	}
	return r
}

// checkSession checks the committed session: turns 1..n without gaps,
// one result per call of each, and returns the statuses by call id
// (the latest turn's, when a call id repeats).
func checkSession(t *testing.T, s cachestore.History, wantTurns int) map[string]string {
	t.Helper()
	recs, err := s.Turns(context.Background(), "s")
	if err != nil {
		t.Fatalf("reading the session: %v", err)
	}
	if len(recs) != wantTurns {
		t.Errorf("%d committed turns, want %d", len(recs), wantTurns)
	}
	out := map[string]string{}
	for i, rec := range recs {
		if rec.Turn != int64(i+1) {
			t.Errorf("turn %d is numbered %d", i+1, rec.Turn)
		}
		calls := rec.Assistant.GetToolCalls()
		if len(rec.ToolMessages) != len(calls) {
			t.Errorf("turn %d: %d results for %d calls (half written)", rec.Turn, len(rec.ToolMessages), len(calls))
		}
		for j, m := range rec.ToolMessages {
			if j < len(calls) && m.ToolCallId != calls[j].Id {
				t.Errorf("turn %d: result %d is for %q, want %q", rec.Turn, j, m.ToolCallId, calls[j].Id)
			}
			out[m.ToolCallId] = m.Status
		}
	}
	return out
}

// checkRanOnce: every mutating call of session s ran at most once, and
// every call that reads ok ran exactly once.
func checkRanOnce(t *testing.T, ran *ranLog, statuses map[string]string) {
	t.Helper()
	for id, n := range ran.all() {
		if strings.Contains(id, "/") {
			continue // another session's
		}
		if n > 1 {
			t.Errorf("call %s ran %d times", id, n)
		}
		if st := statuses[id]; st != "ok" && st != "outcome_unknown" {
			t.Errorf("call %s ran, and reads %q (want ok or outcome_unknown)", id, st)
		}
	}
}

// storeFaultCase is one fault and what it must lead to.
type storeFaultCase struct {
	name string
	// run injects the fault, checks the faulty turn, lets the store work
	// again and dispatches the next turn; it returns how many turns the
	// session must hold once loaded again.
	run func(t *testing.T, n *faultNode) (turns int)
	// after checks the statuses after a restart.
	after map[string]string
}

var storeFaultCases = []storeFaultCase{
	{
		name: "intent write fails",
		run: func(t *testing.T, n *faultNode) int {
			n.inj.Set(faults.Rule{Ops: []seam.Kind{seam.WriteIntent}, Fault: faults.Fault{Kind: faults.WriteError}})
			r, err := n.dispatch(faultTurn(faultCall("a", "echo", `{"x":"1"}`), faultCall("m", "note", `{}`)))
			if err != nil {
				t.Fatalf("the turn whose intent failed: %v (want its calls to fail, committed)", err)
			}
			for _, m := range r.Messages {
				if m.Status != "error" || !strings.Contains(m.Content, "could not record") || !strings.Contains(m.Content, "input/output error") {
					t.Errorf("%s = %s %q, want error saying the start could not be recorded and why", m.ToolCallId, m.Status, m.Content)
				}
			}
			if n.ran.count("m") != 0 {
				t.Error("the mutating call ran though its intent was not written")
			}
			n.inj.Clear()
			n.mustTurn(faultTurn(faultCall("b", "note", `{}`)), "b=ok")
			return 2
		},
		after: map[string]string{"a": "error", "m": "error", "b": "ok"},
	},
	{
		name: "commit write fails",
		run: func(t *testing.T, n *faultNode) int {
			n.inj.Set(faults.Rule{Ops: []seam.Kind{seam.CommitTurn}, Fault: faults.Fault{Kind: faults.WriteError}})
			r, err := n.dispatch(faultTurn(faultCall("m", "note", `{}`)))
			wantTurnError(t, r, err, "input/output error")
			n.inj.Clear()
			n.mustTurn(faultTurn(faultCall("b", "note", `{}`)), "b=ok")
			return 2
		},
		after: map[string]string{"m": "outcome_unknown", "b": "ok"},
	},
	{
		name: "disk full on commit",
		run: func(t *testing.T, n *faultNode) int {
			n.inj.Set(faults.Rule{Ops: []seam.Kind{seam.CommitTurn}, Fault: faults.Fault{Kind: faults.DiskFull}})
			r, err := n.dispatch(faultTurn(faultCall("m", "note", `{}`)))
			wantTurnError(t, r, err, "no space left on device")
			if !errors.Is(err, cachestore.ErrNoSpace) {
				t.Errorf("the error of a turn refused for want of space is not cachestore.ErrNoSpace: %v", err)
			}
			n.inj.Clear()
			n.mustTurn(faultTurn(faultCall("b", "note", `{}`)), "b=ok")
			return 2
		},
		after: map[string]string{"m": "outcome_unknown", "b": "ok"},
	},
	{
		name: "commit applied, fsync fails",
		run: func(t *testing.T, n *faultNode) int {
			n.inj.Set(faults.Rule{Ops: []seam.Kind{seam.CommitTurn}, Fault: faults.Fault{Kind: faults.SyncError}})
			r, err := n.dispatch(faultTurn(faultCall("m", "note", `{}`)))
			wantTurnError(t, r, err, "fsync failed")
			if err != nil && !strings.Contains(err.Error(), "may hold") {
				t.Errorf("the error does not say the session may hold the turn after all: %v", err)
			}
			n.inj.Clear()
			n.mustTurn(faultTurn(faultCall("b", "note", `{}`)), "b=ok")
			return 2
		},
		after: map[string]string{"m": "ok", "b": "ok"},
	},
	{
		name: "the second write of a turn fails",
		run: func(t *testing.T, n *faultNode) int {
			// note, echo, note: two segments, two intents, then the commit.
			n.inj.Set(faults.Rule{Nth: 2, Fault: faults.Fault{Kind: faults.WriteError}})
			r, err := n.dispatch(faultTurn(faultCall("m1", "note", `{}`), faultCall("a", "echo", `{}`), faultCall("m2", "note", `{"x":"2"}`)))
			if err != nil {
				t.Fatalf("the turn whose second intent failed: %v (want the calls after it to fail, committed)", err)
			}
			if got := statusList(r); got != "m1=ok a=error m2=error" {
				t.Errorf("statuses %s, want m1=ok a=error m2=error", got)
			}
			n.inj.Clear()
			n.mustTurn(faultTurn(faultCall("b", "note", `{}`)), "b=ok")
			return 2
		},
		after: map[string]string{"m1": "ok", "a": "error", "m2": "error", "b": "ok"},
	},
	{
		name: "commit stalls until the store comes back",
		run: func(t *testing.T, n *faultNode) int {
			stalled := n.injectedSignal()
			n.inj.Set(faults.Rule{Ops: []seam.Kind{seam.CommitTurn}, Session: "s", Fault: faults.Fault{Kind: faults.Stall}})
			// The caller gives up while the commit is stalled.
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			var res *messages.TurnResult
			go func() {
				r, err := n.d.Dispatch(ctx, faultTurn(faultCall("m", "note", `{}`)))
				res = r
				done <- err
			}()
			<-stalled
			cancel()
			// Other sessions go on meanwhile.
			other := faultTurn(faultCall("o", "note", `{}`))
			other.Session = "s2"
			n.mustTurn(other, "o=ok")
			if st := checkSession(t, n.store, 0); len(st) != 0 {
				t.Errorf("session s holds %v while its commit is stalled", st)
			}
			n.inj.Release()
			if err := <-done; err != nil {
				t.Fatalf("the stalled turn: %v (want its committed result once the store is back)", err)
			}
			if got := statusList(res); got != "m=ok" {
				t.Errorf("stalled turn: %s, want m=ok", got)
			}
			n.inj.Clear()
			n.mustTurn(faultTurn(faultCall("b", "note", `{}`)), "b=ok")
			return 2
		},
		after: map[string]string{"m": "ok", "b": "ok"},
	},
	{
		name: "loading the session fails",
		run: func(t *testing.T, n *faultNode) int {
			n.mustTurn(faultTurn(faultCall("a", "note", `{}`)), "a=ok")
			// A new process: the first turn loads the session.
			n.inj.Set(faults.Rule{Ops: []seam.Kind{seam.LoadSession}, Fault: faults.Fault{Kind: faults.ReadError}})
			return -1 // restart first (see runFaultCase)
		},
		after: map[string]string{"a": "ok", "y": "ok"},
	},
	{
		name: "a deferred approval's claim fails",
		run: func(t *testing.T, n *faultNode) int {
			hash := deferNote(t, n)
			n.inj.Set(faults.Rule{Ops: []seam.Kind{seam.ClaimApproval}, Fault: faults.Fault{Kind: faults.WriteError}})
			if _, err := n.confirm("d", hash); err == nil || !strings.Contains(err.Error(), "nothing was taken") {
				t.Errorf("an answer whose claim failed: %v, want an error saying nothing was taken", err)
			}
			if n.ran.count("d") != 0 {
				t.Error("the call ran though its approval could not be claimed")
			}
			n.inj.Clear()
			if st, err := n.confirm("d", hash); err != nil || st != "accepted" {
				t.Fatalf("the answer again once the store works: %q, %v", st, err)
			}
			if e := n.result(t, "d"); e.Status != "ok" {
				t.Errorf("the approved call: %s, want ok", e.Status)
			}
			n.mustTurn(faultTurn(faultCall("b", "note", `{}`)), "b=ok")
			return 2
		},
		after: map[string]string{"d": "ok", "b": "ok"},
	},
	{
		name: "a deferred approval's settlement fails",
		run: func(t *testing.T, n *faultNode) int {
			hash := deferNote(t, n)
			failed := n.injectedSignal()
			n.inj.Set(faults.Rule{Ops: []seam.Kind{seam.SettleApproval}, Fault: faults.Fault{Kind: faults.WriteError}})
			if st, err := n.confirm("d", hash); err != nil || st != "accepted" {
				t.Fatalf("the answer: %q, %v", st, err)
			}
			// The approved call ran; its result could not be written. The
			// next turn of the session runs after the answer's job.
			<-failed
			n.inj.Clear()
			n.mustTurn(faultTurn(faultCall("b", "note", `{}`)), "b=ok")
			if n.ran.count("d") != 1 {
				t.Errorf("the approved call ran %d times, want once", n.ran.count("d"))
			}
			// Without a restart, the call reads what a crash would leave:
			// outcome_unknown, not awaiting_approval for ever.
			if st := checkSession(t, n.store, 2)["d"]; st != "outcome_unknown" {
				t.Errorf("the approved call whose result was not written reads %q before a restart, want outcome_unknown", st)
			}
			if st, _ := n.confirm("d", hash); st != "already_answered" {
				t.Errorf("answering it again: %q, want already_answered", st)
			}
			return 2
		},
		after: map[string]string{"d": "outcome_unknown", "b": "ok"},
	},
	{
		name: "the cache fails",
		run: func(t *testing.T, n *faultNode) int {
			url := n.webURL
			n.inj.Set(faults.Rule{Ops: []seam.Kind{seam.CacheGet}, Count: -1, Fault: faults.Fault{Kind: faults.ReadError}},
				faults.Rule{Ops: []seam.Kind{seam.CachePut}, Count: -1, Fault: faults.Fault{Kind: faults.WriteError}})
			n.mustTurn(faultTurn(faultCall("f1", "fetch_page", `{"url":"`+url+`"}`)), "f1=ok")
			// Another run (no de-duplication): the cache held nothing.
			tr := faultTurn(faultCall("f2", "fetch_page", `{"url":"`+url+`"}`))
			tr.Run = "r2"
			n.mustTurn(tr, "f2=ok")
			if got := n.webHits.Load(); got != 2 {
				t.Errorf("the page was fetched %d times, want 2 (the cache was down)", got)
			}
			n.inj.Clear()
			tr = faultTurn(faultCall("f3", "fetch_page", `{"url":"`+url+`"}`))
			tr.Run = "r3"
			n.mustTurn(tr, "f3=ok")
			tr = faultTurn(faultCall("f4", "fetch_page", `{"url":"`+url+`"}`))
			tr.Run = "r4"
			n.mustTurn(tr, "f4=ok")
			if got := n.webHits.Load(); got != 3 {
				t.Errorf("the page was fetched %d times, want 3 (the cache works again)", got)
			}
			return 4
		},
		after: map[string]string{"f1": "ok", "f2": "ok", "f3": "ok", "f4": "ok"},
	},
}

func statusList(r *messages.TurnResult) string {
	var out []string
	for _, m := range r.GetMessages() {
		out = append(out, m.ToolCallId+"="+m.Status)
	}
	return strings.Join(out, " ")
}

// wantTurnError: the turn failed with an infrastructure error naming the
// store's error, and handed out no result.
func wantTurnError(t *testing.T, r *messages.TurnResult, err error, text string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the turn succeeded: %s", statusList(r))
	}
	if !strings.Contains(err.Error(), text) {
		t.Errorf("the turn's error does not say %q: %v", text, err)
	}
	if len(r.GetMessages()) != 0 {
		t.Errorf("a turn that was not committed handed out results: %s", statusList(r))
	}
}

// deferNote commits a mutating call awaiting_approval and returns the hash
// of its arguments.
func deferNote(t *testing.T, n *faultNode) string {
	t.Helper()
	tr := faultTurn(faultCall("d", "note", `{}`))
	tr.Approve, tr.Confirm = actors.ApproveAsk, actors.ConfirmDefer
	n.mustTurn(tr, "d=awaiting_approval")
	as, err := n.store.Approvals(context.Background(), "s")
	if err != nil || len(as) != 1 {
		t.Fatalf("approvals: %v, %v", as, err)
	}
	return as[0].ArgsHash
}

func (n *faultNode) confirm(callID, hash string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ack, err := n.d.Confirm(ctx, &messages.ConfirmReply{Session: "s", CallId: callID, Approve: true, ArgsHash: hash})
	return ack.GetStatus(), err
}

// result waits for the tool_result of callID that settles it (the one
// of its turn's commit, awaiting_approval, is passed over).
func (n *faultNode) result(t *testing.T, callID string) *messages.Event {
	t.Helper()
	for {
		select {
		case e := <-n.resultChan(callID):
			if e.Status == string(toolkit.StatusAwaitingApproval) {
				continue
			}
			return e
		case <-time.After(time.Minute):
			t.Fatalf("no tool_result for %s", callID)
			return nil
		}
	}
}

// injectedSignal returns a channel closed at the next injected fault.
func (n *faultNode) injectedSignal() <-chan struct{} {
	c := make(chan struct{})
	var once sync.Once
	n.inj.OnInject = func(faults.Injected) { once.Do(func() { close(c) }) }
	return c
}

// TestStorageFaults runs every storage fault against every store.
func TestStorageFaults(t *testing.T) {
	for _, st := range faultStores {
		t.Run(st.name, func(t *testing.T) {
			for _, c := range storeFaultCases {
				t.Run(c.name, func(t *testing.T) { runFaultCase(t, st.open, c) })
			}
		})
	}
}

func runFaultCase(t *testing.T, open func(*testing.T) (cachestore.Store, func() cachestore.Store), c storeFaultCase) {
	s, restart := open(t)
	ran := &ranLog{n: map[string]int{}}
	var hits atomic.Int64
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><head><title>T</title></head><body><p>a page about storage faults</p></body></html>")
	}))
	defer page.Close()
	deps := &web.Deps{Config: web.Config{AllowLoopback: true, Timeout: 10 * time.Second}}
	n := newFaultNode(t, s, ran, deps)
	n.webURL, n.webHits = page.URL, &hits
	turns := c.run(t, n)
	if turns < 0 {
		// The fault hits the next process's first load.
		rules := []faults.Rule{{Ops: []seam.Kind{seam.LoadSession}, Fault: faults.Fault{Kind: faults.ReadError}}}
		n.close()
		n = newFaultNode(t, restart(), ran, deps)
		n.webURL, n.webHits = page.URL, &hits
		n.inj.Set(rules...)
		r, err := n.dispatch(faultTurn(faultCall("x", "note", `{}`)))
		wantTurnError(t, r, err, "input/output error")
		if ran.count("x") != 0 {
			t.Error("a call ran though its session could not be loaded")
		}
		n.inj.Clear()
		n.mustTurn(faultTurn(faultCall("y", "note", `{}`)), "y=ok")
		turns = 2
	}
	checkRanOnce(t, ran, checkSession(t, n.store, turns))
	n.close()

	// A restart recovers: a new dispatcher over the store opened again.
	n = newFaultNode(t, restart(), ran, deps)
	n.webURL, n.webHits = page.URL, &hits
	defer n.close()
	n.mustTurn(faultTurn(faultCall("z", "note", `{}`)), "z=ok")
	got := checkSession(t, n.store, turns+1)
	for id, want := range c.after {
		if got[id] != want {
			t.Errorf("after a restart %s reads %q, want %q", id, got[id], want)
		}
	}
	checkRanOnce(t, ran, got)
}
