package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
	"github.com/tooldispatch/tooldispatch/toolkit/web"
)

// NoopSchema is the parameter schema of the no-op tools.
const NoopSchema = `{"type":"object","properties":{"i":{"type":"integer"},"ms":{"type":"integer"}},"required":["i"],"additionalProperties":false}`

// Registry returns the tools of the workloads: noop (concurrent), noop_seq
// (sequential), sleep (concurrent, sleeps "ms" milliseconds) and the
// built-in calculate (concurrent).
func Registry() *toolkit.Registry {
	reg := toolkit.NewRegistry()
	for _, t := range builtin.Tools(builtin.Deps{}) {
		if t.Name == calculate {
			reg.Register(t)
		}
	}
	ok := func(context.Context, *toolkit.Call) (toolkit.Result, error) {
		return toolkit.Result{Content: "ok"}, nil
	}
	reg.Register(toolkit.Tool{Name: "noop", Description: "Does nothing.", Concurrent: true, ReadOnly: true, Schema: []byte(NoopSchema), Handler: ok})
	reg.Register(toolkit.Tool{Name: "noop_seq", Description: "Does nothing, alone.", ReadOnly: true, Schema: []byte(NoopSchema), Handler: ok})
	reg.Register(toolkit.Tool{Name: "sleep", Description: "Sleeps ms milliseconds.", Concurrent: true, ReadOnly: true, Schema: []byte(NoopSchema),
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			t := time.NewTimer(time.Duration(c.Args.Int("ms", 0)) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
				return toolkit.Result{Content: "ok"}, nil
			case <-ctx.Done():
				return toolkit.Result{}, ctx.Err()
			}
		}})
	return reg
}

// calculate is the built-in tool of the one-call and 4-call workloads.
const calculate = "calculate"

// Turn builds a turn of calls named by tools (one entry per call) with
// distinct arguments seeded by seq, so de-duplication never shortens it
// (calculate gets the expression "x * 3" with a distinct x).
func Turn(session string, seq int, tools []string, ms int) *messages.DispatchTurn {
	calls := make([]*messages.ToolCall, len(tools))
	for i, name := range tools {
		args := `{"i":` + strconv.Itoa(seq*len(tools)+i) + `}`
		switch {
		case name == calculate:
			args = `{"expression":"` + strconv.Itoa(seq*len(tools)+i) + ` * 3"}`
		case ms > 0:
			args = `{"i":` + strconv.Itoa(seq*len(tools)+i) + `,"ms":` + strconv.Itoa(ms) + `}`
		}
		calls[i] = &messages.ToolCall{Id: "c" + strconv.Itoa(i), Type: "function", Function: &messages.FunctionCall{Name: name, Arguments: args}}
	}
	return &messages.DispatchTurn{Session: session, Run: "bench", Provider: toolkit.ProviderClaudeCode, AutoLoadSchemas: true,
		Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: calls}}
}

func repeat(name string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = name
	}
	return s
}

// system is one dispatcher under test.
type system struct {
	name     string
	dispatch func(context.Context, *messages.DispatchTurn) error
	close    func()
	store    cachestore.Store
}

// openSystem starts system kind (SysBadger, SysMemory or SysBare) with a
// fresh store; fsync selects SyncWrites for Badger.
func openSystem(kind string, fsync bool, limit int, idle time.Duration) (*system, error) {
	return openSystemWith(kind, fsync, limit, idle, nil)
}

// openSystemWith is openSystem with the dispatcher's view of the store
// wrapped by wrap (nil: not wrapped); system.store stays the store itself.
func openSystemWith(kind string, fsync bool, limit int, idle time.Duration, wrap func(cachestore.Store) cachestore.Store) (*system, error) {
	var store cachestore.Store
	var dir string
	if kind == SysMemory {
		store = cachestore.NewMemory()
	} else {
		var err error
		if dir, err = os.MkdirTemp("", "tooldispatch-bench-*"); err != nil {
			return nil, err
		}
		if store, err = badger.Open(badger.Options{Dir: dir, SyncWrites: fsync, Small: true, Logger: zerolog.Nop()}); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	closeStore := func() {
		_ = store.Close()
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	reg := Registry()
	seen := store
	if wrap != nil {
		seen = wrap(store)
	}
	if kind == SysBare {
		b := NewBare(reg, seen, limit)
		return &system{name: kind, dispatch: b.Dispatch, close: closeStore, store: store}, nil
	}
	d, err := actors.New(actors.Config{Registry: reg, Store: seen, MaxConcurrency: limit, SessionIdle: idle})
	if err != nil {
		closeStore()
		return nil, err
	}
	return &system{name: kind, store: store,
		dispatch: func(ctx context.Context, t *messages.DispatchTurn) error {
			_, err := d.Dispatch(ctx, t)
			return err
		},
		close: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = d.Close(ctx)
			closeStore()
		}}, nil
}

type runner struct {
	o   Options
	rep *Report
}

func (r *runner) pick(full, quick int) int {
	if r.o.Quick {
		return quick
	}
	return full
}

// perCall runs turns built by mk on each of a, b, c and adds µs per call.
func (r *runner) perCall(ctx context.Context, workload string, turns int, mk func(seq int) *messages.DispatchTurn) error {
	return r.measureTurns(ctx, workload, "µs/call", turns, mk)
}

// perTurn runs turns built by mk on each of a, b, c and adds µs per turn.
func (r *runner) perTurn(ctx context.Context, workload string, turns int, mk func(seq int) *messages.DispatchTurn) error {
	return r.measureTurns(ctx, workload, "µs/turn", turns, mk)
}

// measureTurns runs turns built by mk on each of a, b, c, in one session,
// one after another, and adds the time per call or per turn (unit).
func (r *runner) measureTurns(ctx context.Context, workload, unit string, turns int, mk func(seq int) *messages.DispatchTurn) error {
	for _, kind := range []string{SysBadger, SysMemory, SysBare} {
		s, err := openSystem(kind, false, 3, 0)
		if err != nil {
			return err
		}
		row := Row{Workload: workload, System: kind, Unit: unit}
		var perCall, perTurn []float64
		seq := 0
		warm := mk(seq)
		seq++
		if err := s.dispatch(ctx, warm); err != nil {
			s.close()
			return err
		}
		for round := 0; round < r.o.Rounds; round++ {
			in := make([]*messages.DispatchTurn, turns)
			for i := range in {
				in[i] = mk(seq)
				seq++
			}
			n := len(in[0].Message.ToolCalls) * turns
			per := n
			if unit == "µs/turn" {
				per = turns
			}
			runtime.GC()
			m0 := mallocs()
			t0 := time.Now()
			for _, t := range in {
				if err := s.dispatch(ctx, t); err != nil {
					s.close()
					return err
				}
			}
			row.Rounds = append(row.Rounds, float64(time.Since(t0).Nanoseconds())/float64(per)/1e3)
			a := float64(mallocs() - m0)
			perCall = append(perCall, a/float64(n))
			perTurn = append(perTurn, a/float64(turns))
		}
		s.close()
		row.AllocsPerCall, row.AllocsPerTurn = median(perCall), median(perTurn)
		r.rep.add(row)
	}
	return nil
}

func (r *runner) noop(ctx context.Context) error {
	return r.perCall(ctx, wNoop, r.pick(200, 20), func(seq int) *messages.DispatchTurn {
		return Turn("noop", seq, repeat("noop", 100), 0)
	})
}

// oneCall runs one-call turns of noop and of calculate: the fixed cost of
// a turn, which most turns an agent sends (one to four calls) pay.
func (r *runner) oneCall(ctx context.Context) error {
	turns := r.pick(2000, 200)
	if err := r.perTurn(ctx, wOneNoop, turns, func(seq int) *messages.DispatchTurn {
		return Turn("one-noop", seq, []string{"noop"}, 0)
	}); err != nil {
		return err
	}
	return r.perTurn(ctx, wOneCalc, turns, func(seq int) *messages.DispatchTurn {
		return Turn("one-calc", seq, []string{calculate}, 0)
	})
}

// FourCallTools are the calls of the 4-call mixed turn: three concurrent
// (noop, calculate, noop: one segment) and a sequential one (a segment of
// its own), as a turn that reads a few things and then changes one.
var FourCallTools = []string{"noop", calculate, "noop", "noop_seq"}

func (r *runner) fourCall(ctx context.Context) error {
	return r.perTurn(ctx, wFour, r.pick(1000, 100), func(seq int) *messages.DispatchTurn {
		return Turn("four", seq, FourCallTools, 0)
	})
}

func (r *runner) mixed(ctx context.Context) error {
	pattern := []string{"noop", "noop", "noop", "noop", "noop_seq"}
	var tools []string
	for range 4 {
		tools = append(tools, pattern...)
	}
	return r.perCall(ctx, "mixed 20-call turn (4 concurrent, 1 sequential, ×4)", r.pick(300, 30), func(seq int) *messages.DispatchTurn {
		return Turn("mixed", seq, tools, 0)
	})
}

func (r *runner) makespan(ctx context.Context) error {
	// A lone 10 ms call, as this machine's timers run it.
	var lone []float64
	sleep, _ := Registry().Lookup("sleep")
	a, _ := toolkit.ParseArgs(`{"i":0,"ms":10}`, toolkit.Limits{})
	for range 7 {
		t0 := time.Now()
		if _, err := sleep.Handler(ctx, &toolkit.Call{Args: a}); err != nil {
			return err
		}
		lone = append(lone, time.Since(t0).Seconds())
	}
	ideal := 100 * median(lone)
	r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("a lone 10 ms call takes %.2f ms here: the ideal makespan of 300 calls at limit 3 is %.3f s", median(lone)*1e3, ideal))
	rounds := min(r.o.Rounds, r.pick(3, 1))
	for _, kind := range []string{SysBadger, SysMemory, SysBare} {
		s, err := openSystem(kind, false, 3, 0)
		if err != nil {
			return err
		}
		mk := Row{Workload: "makespan 300×10 ms, limit 3", System: kind, Unit: "s"}
		eff := Row{Workload: "makespan efficiency (ideal/measured)", System: kind, Unit: "ratio", Note: fmt.Sprintf("ideal %.3f s", ideal)}
		for round := 0; round < rounds; round++ {
			t := Turn("makespan", round, repeat("sleep", 300), 10)
			t0 := time.Now()
			if err := s.dispatch(ctx, t); err != nil {
				s.close()
				return err
			}
			d := time.Since(t0).Seconds()
			mk.Rounds = append(mk.Rounds, d)
			eff.Rounds = append(eff.Rounds, ideal/d)
		}
		s.close()
		r.rep.add(mk)
		r.rep.add(eff)
	}
	return nil
}

func (r *runner) preflight(context.Context) error {
	args, schema, name := tauCall(r.o.TauBench)
	cache := toolkit.NewSchemaCache()
	if _, err := cache.Compile(schema); err != nil {
		return err
	}
	row := Row{Workload: "preflight of one validated call", System: SysShared, Unit: "µs/call", Note: name}
	n := r.pick(20000, 2000)
	for round := 0; round < r.o.Rounds; round++ {
		t0 := time.Now()
		for range n {
			a, err := toolkit.ParseArgs(args, toolkit.Limits{})
			if err != nil {
				return err
			}
			s, err := cache.Compile(schema)
			if err != nil {
				return err
			}
			if err := s.Validate(a.Value); err != nil {
				return err
			}
			_ = toolkit.DedupKey("t", a)
		}
		row.Rounds = append(row.Rounds, float64(time.Since(t0).Nanoseconds())/float64(n)/1e3)
	}
	r.rep.add(row)
	return nil
}

// fallbackSchema and fallbackArgs stand in for τ-bench's
// exchange_delivered_order_items when its file is not found.
const (
	fallbackSchema = `{"type":"object","properties":{"order_id":{"type":"string","description":"The order id, such as '#W0000000'."},"item_ids":{"type":"array","items":{"type":"string"}},"new_item_ids":{"type":"array","items":{"type":"string"}},"payment_method_id":{"type":"string"}},"required":["order_id","item_ids","new_item_ids","payment_method_id"]}`
	fallbackArgs   = `{"order_id":"#W2378156","item_ids":["1151293680","4983901480"],"new_item_ids":["7706410293","7747408585"],"payment_method_id":"credit_card_9513926"}`
)

// tauCall returns the first exchange_delivered_order_items call of
// τ-bench's retail domain and its schema.
func tauCall(path string) (args string, schema []byte, name string) {
	if path == "" {
		path = findUp(filepath.Join("..", "shared", "testdata", "tau-bench", "expected-calls.json"))
	}
	raw, err := os.ReadFile(path)
	if path == "" || err != nil {
		return fallbackArgs, []byte(fallbackSchema), "built-in schema (τ-bench file not found)"
	}
	var data map[string]struct {
		Tools map[string]struct {
			Parameters json.RawMessage `json:"parameters"`
		} `json:"tools"`
		Calls []struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"calls"`
	}
	if json.Unmarshal(raw, &data) != nil {
		return fallbackArgs, []byte(fallbackSchema), "built-in schema (τ-bench file unreadable)"
	}
	const tool = "exchange_delivered_order_items"
	for _, c := range data["retail"].Calls {
		if c.Name != tool {
			continue
		}
		text := string(c.Arguments)
		var s string
		if json.Unmarshal(c.Arguments, &s) == nil {
			text = s
		}
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(text)) != nil {
			break
		}
		return buf.String(), data["retail"].Tools[tool].Parameters, "τ-bench retail/" + tool
	}
	return fallbackArgs, []byte(fallbackSchema), "built-in schema (call not in τ-bench file)"
}

// findUp looks for rel from the working directory and its parents.
func findUp(rel string) string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// page20K is an article page of about 20 KB.
func page20K() string {
	var b strings.Builder
	b.WriteString("<!doctype html><html><head><title>Growing Tomatoes at Home</title></head><body><nav><a href=\"/\">Home</a></nav><article><h1>Growing Tomatoes at Home</h1>")
	topics := []string{"sunlight", "watering", "soil", "pruning", "pests", "harvest", "varieties", "fertiliser"}
	for i := 0; b.Len() < 20<<10; i++ {
		t := topics[i%len(topics)]
		fmt.Fprintf(&b, "<h2>On %s, part %d</h2><p>Tomatoes need care with %s: this paragraph %d explains how gardeners handle %s through the season, what goes wrong and how to fix it when leaves curl or fruit splits after heavy rain.</p>", t, i, t, i, t)
	}
	b.WriteString("</article></body></html>")
	return b.String()
}

func (r *runner) fetchPage(ctx context.Context) error {
	body := page20K()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	n := r.pick(2000, 100)
	for _, kind := range []string{SysBadger, SysMemory} {
		var store cachestore.Store
		dir := ""
		if kind == SysMemory {
			store = cachestore.NewMemory()
		} else {
			var err error
			if dir, err = os.MkdirTemp("", "tooldispatch-bench-*"); err != nil {
				return err
			}
			if store, err = badger.Open(badger.Options{Dir: dir, Small: true, Logger: zerolog.Nop()}); err != nil {
				return err
			}
		}
		w, err := web.New(web.Deps{Config: web.Config{AllowLoopback: true}, Cache: web.CacheFromStore(store)})
		if err != nil {
			return err
		}
		var fetch toolkit.Tool
		for _, t := range w.Tools() {
			if t.Name == web.FetchPageName {
				fetch = t
			}
		}
		a, err := toolkit.ParseArgs(`{"url":"`+srv.URL+`/article","query":"watering tomatoes when leaves curl"}`, toolkit.Limits{})
		if err != nil {
			return err
		}
		call := &toolkit.Call{Session: "s", Run: "r", ID: "c1", Name: web.FetchPageName, Args: a, Emit: func(string) {}}
		res, err := fetch.Handler(ctx, call) // fills the cache
		if err != nil {
			return err
		}
		row := Row{Workload: wFetch, System: kind, Unit: "µs/call",
			Note: fmt.Sprintf("page %d B, result %d B", len(body), len(res.Content))}
		var perCall []float64
		for round := 0; round < r.o.Rounds; round++ {
			runtime.GC()
			m0 := mallocs()
			t0 := time.Now()
			for range n {
				res, err := fetch.Handler(ctx, call)
				if err != nil {
					return err
				}
				if !strings.Contains(res.Content, "from cache") {
					return errors.New("fetch_page missed its cache")
				}
			}
			row.Rounds = append(row.Rounds, float64(time.Since(t0).Nanoseconds())/float64(n)/1e3)
			perCall = append(perCall, float64(mallocs()-m0)/float64(n))
		}
		row.AllocsPerCall = median(perCall)
		w.Close()
		_ = store.Close()
		if dir != "" {
			os.RemoveAll(dir)
		}
		r.rep.add(row)
	}
	return nil
}

// peerResult is what the eino peer prints.
type peerResult struct {
	Eino             string  `json:"eino"`
	RawNsPerCall     float64 `json:"raw_ns_per_call"`
	WrappedNsPerCall float64 `json:"wrapped_ns_per_call"`
}

func (r *runner) eino(ctx context.Context) error {
	if r.o.NoPeers {
		r.rep.Notes = append(r.rep.Notes, "eino: not measured (--no-peers)")
		return nil
	}
	dir := r.o.PeersDir
	if dir == "" {
		dir = findUp(filepath.Join("integration_test", "peers"))
	}
	if dir == "" {
		r.rep.Notes = append(r.rep.Notes, "eino: not measured (integration_test/peers not found; pass --peers DIR)")
		return nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		r.rep.Notes = append(r.rep.Notes, "eino: not measured (no go command on PATH)")
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	// The peers module builds against the checkout it sits in through a
	// workspace of the two modules, written to a temporary directory: the
	// checkout's own go.sum vouches for its dependencies, so the peers'
	// go.sum need not follow every change of the root module.
	work, err := peersWorkspace(dir)
	if err != nil {
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("eino: not measured (%v)", err))
		return nil
	}
	defer os.RemoveAll(filepath.Dir(work))
	cmd := exec.CommandContext(cctx, goBin, "run", "./eino", "-rounds", strconv.Itoa(r.o.Rounds), "-turns", strconv.Itoa(r.pick(200, 20)))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+work)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("eino: not measured (%v: %s)", err, msg))
		return nil
	}
	var p peerResult
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("eino: not measured (bad output: %v)", err))
		return nil
	}
	const w = wNoop
	r.rep.add(Row{Workload: w, System: SysEino, Unit: "µs/call", Rounds: []float64{p.RawNsPerCall / 1e3},
		Note: "eino " + p.Eino + ": no validation, no limit, nothing stored; median of its own rounds"})
	r.rep.add(Row{Workload: w, System: SysEinoW, Unit: "µs/call", Rounds: []float64{p.WrappedNsPerCall / 1e3},
		Note: "eino " + p.Eino + " + same parse/validation per call, intent + commit per turn in Badger"})
	return nil
}

// peersWorkspace writes a go.work that uses the peers module in dir and
// the module it replaces tooldispatch with (its `replace … => ../..`), in a
// new temporary directory, and returns the file's path.
func peersWorkspace(dir string) (string, error) {
	peers, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	root := filepath.Join(peers, "..", "..")
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(mod, []byte("module github.com/tooldispatch/tooldispatch\n")) {
		return "", fmt.Errorf("%s is not the tooldispatch module the peers module sits in", root)
	}
	tmp, err := os.MkdirTemp("", "tooldispatch-peers-*")
	if err != nil {
		return "", err
	}
	work := filepath.Join(tmp, "go.work")
	text := fmt.Sprintf("go %s\n\nuse (\n\t%s\n\t%s\n)\n", goVersion(mod), strconv.Quote(root), strconv.Quote(peers))
	if err := os.WriteFile(work, []byte(text), 0o644); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	return work, nil
}

// goVersion is the go directive of a go.mod (1.26.0 when it has none).
func goVersion(mod []byte) string {
	for line := range strings.Lines(string(mod)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	return "1.26.0"
}

// targets checks the goals against the rows. The ratio is measured /
// bound: ≤ 1 meets an upper bound, ≥ 1 a lower one. A target whose rows
// are missing is named in the notes.
func targets(rep *Report) []Target {
	var ts []Target
	get := func(w, s string) (float64, bool) {
		row, ok := rep.Find(w, s)
		return row.Median, ok && row.Median > 0
	}
	missing := func(name string) { rep.Notes = append(rep.Notes, "target "+name+": not measured in this run") }
	upper := func(name, goal string, v, bound float64, unit string) {
		ts = append(ts, Target{Name: name, Goal: goal, Measured: fmt.Sprintf("%s %s", num(v), unit), Ratio: v / bound, Met: v <= bound})
	}
	lower := func(name, goal string, v, bound float64, unit string) {
		ts = append(ts, Target{Name: name, Goal: goal, Measured: fmt.Sprintf("%s %s", num(v), unit), Ratio: v / bound, Met: v >= bound})
	}
	// relative checks row (w, s) against factor × row (w2, s2).
	relative := func(name string, w, s, w2, s2 string, factor float64, atMost bool, unit string) {
		v, ok1 := get(w, s)
		ref, ok2 := get(w2, s2)
		if !ok1 || !ok2 {
			missing(name)
			return
		}
		if atMost {
			upper(name, fmt.Sprintf("≤ %s %s", num(factor*ref), unit), v, factor*ref, unit)
		} else {
			lower(name, fmt.Sprintf("≥ %s %s", num(factor*ref), unit), v, factor*ref, unit)
		}
	}
	absolute := func(name string, w, s string, bound float64, atMost bool, unit string) {
		v, ok := get(w, s)
		if !ok {
			missing(name)
			return
		}
		if atMost {
			upper(name, fmt.Sprintf("≤ %s %s", num(bound), unit), v, bound, unit)
		} else {
			lower(name, fmt.Sprintf("≥ %s %s", num(bound), unit), v, bound, unit)
		}
	}
	serviceOnly := len(rep.Rows) > 0 && rep.Rows[0].Workload == wSvcRate
	if !serviceOnly {
		// Actors for free.
		relative("no-op: (a) ≤ 1.10 × (c)", wNoop, SysBadger, wNoop, SysBare, 1.10, true, "µs/call")
		relative("one-call no-op turn: (a) ≤ 1.15 × (c)", wOneNoop, SysBadger, wOneNoop, SysBare, 1.15, true, "µs/turn")
		relative("one-call calculate turn: (a) ≤ 1.15 × (c)", wOneCalc, SysBadger, wOneCalc, SysBare, 1.15, true, "µs/turn")
		relative("4-call mixed turn: (a) ≤ 1.15 × (c)", wFour, SysBadger, wFour, SysBare, 1.15, true, "µs/turn")
		relative("64 sessions, no fsync: (a) ≥ 0.85 × (c)", wSessions, SysBadger, wSessions, SysBare, 0.85, false, "calls/s")
		relative("64 sessions, fsync: (a) ≥ 0.85 × (c)", wSessionsSync, SysBadger, wSessionsSync, SysBare, 0.85, false, "calls/s")
		relative("100 000 sessions: (a) ≥ 0.85 × (c)", wMany, SysBadger, wMany, SysBare, 0.85, false, "calls/s")
		// Ahead of the peer.
		if _, ok := get(wNoop, SysEinoW); ok {
			relative("no-op: (b) ≤ eino wrapped", wNoop, SysMemory, wNoop, SysEinoW, 1, true, "µs/call")
		} else {
			missing("no-op: (b) ≤ eino wrapped")
		}
		// Allocations.
		if row, ok := rep.Find(wNoop, SysBadger); ok && row.AllocsPerCall > 0 {
			upper("no-op: allocations per call (a)", "≤ 25", row.AllocsPerCall, 25, "allocs")
		} else {
			missing("no-op: allocations per call (a)")
		}
		// Many sessions.
		relative("100 000 sessions ≥ 0.8 × 64 sessions (a)", wMany, SysBadger, wSessions, SysBadger, 0.8, false, "calls/s")
		// MCP at the cost of a bare client.
		absolute("MCP τ-bench airline: tooldispatch ≤ 1.15 × bare go-sdk client (paired ratio)", wTauRatio, SysBadger, 1.15, true, "×")
		// Guards of earlier rounds: idle sessions, growth, the cached page.
		absolute("idle session (a), not passivated", wIdle, SysBadger, 1.5, true, "KiB")
		absolute("idle session (b), not passivated", wIdle, SysMemory, 1.5, true, "KiB")
		absolute("idle session (a), passivated", wIdlePassive, SysBadger, 1.5, true, "KiB")
		absolute("idle session (b), passivated", wIdlePassive, SysMemory, 1.5, true, "KiB")
		relative("4 096-call turn ≤ 1.2 × 100-call, per call (a)", wBigTurn, SysBadger, wNoop, SysBadger, 1.2, true, "µs/call")
		relative("4 096-call turn ≤ 1.2 × 100-call, per call (b)", wBigTurn, SysMemory, wNoop, SysMemory, 1.2, true, "µs/call")
		late := wTurnLate
		if rep.Quick {
			late = "turn 100 of one run (100 calls)"
		}
		relative("late turn ≤ 1.2 × turn 10 (a)", late, SysBadger, wTurnEarly, SysBadger, 1.2, true, "µs/call")
		relative("late turn ≤ 1.2 × turn 10 (b)", late, SysMemory, wTurnEarly, SysMemory, 1.2, true, "µs/call")
		absolute("cached 20 KB fetch_page (a)", wFetch, SysBadger, 100, true, "µs")
		absolute("cached 20 KB fetch_page (b)", wFetch, SysMemory, 100, true, "µs")
		absolute("preflight of a validated call", "preflight of one validated call", SysShared, 10, true, "µs")
		absolute("makespan efficiency (a)", "makespan efficiency (ideal/measured)", SysBadger, 0.97, false, "")
		// The approvals listing at scale.
		absolute("pending: a page of 50 of 100 000 approvals", wPendPage, SysBadger, 20, true, "ms")
		absolute("pending: a page of 50 of 40 big turns, time", wPendBigPage, SysBadger, 20, true, "ms")
		absolute("pending: a page of 50 of 40 big turns, bytes", wPendBigBytes, SysBadger, 100, true, "KiB")
		absolute("pending: 8 concurrent walks, peak heap growth", wPendBigPeak, SysBadger, 100, true, "MiB")
	}
	if _, ok := get(wSvcRate, SysBadger); ok {
		// Tail: half the closed-loop throughput offered open-loop; the
		// 5 000 calls/s point and the saturated p99 are reported only.
		absolute("service p99 at half the closed-loop calls/s offered", wSvcHalfP99, SysBadger, 10, true, "ms")
	}
	return ts
}
