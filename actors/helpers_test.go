package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// protoactor's actor system keeps process-wide goroutines.
		// protoactor's dead-letter throttle goroutine outlives its actor
		// system (it waits on a ticker it never stops).
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		// regexp2's match-timeout clock stops itself ~1 s after the last match.
		goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock"),
	)
}

// probe records what the test tools did.
type probe struct {
	mu       sync.Mutex
	log      []string // "start:<id>", "end:<id>"
	runs     map[string]int
	inflight atomic.Int64
	peak     atomic.Int64
	release  chan struct{}
}

func newProbe() *probe { return &probe{runs: map[string]int{}, release: make(chan struct{})} }

func (p *probe) note(s string) {
	p.mu.Lock()
	p.log = append(p.log, s)
	p.mu.Unlock()
}

func (p *probe) enter(id string) {
	n := p.inflight.Add(1)
	for {
		old := p.peak.Load()
		if n <= old || p.peak.CompareAndSwap(old, n) {
			break
		}
	}
	p.mu.Lock()
	p.log = append(p.log, "start:"+id)
	p.runs[id]++
	p.mu.Unlock()
}

func (p *probe) leave(id string) {
	p.note("end:" + id)
	p.inflight.Add(-1)
}

func (p *probe) count(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs[id]
}

func (p *probe) snapshot() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

const objSchema = `{"type":"object","properties":{"ms":{"type":"integer"},"x":{"type":"string"},"path":{"type":"string"}},"additionalProperties":false}`

// testRegistry registers find_tools/run_tool and tools whose behaviour the
// tests observe through p.
func testRegistry(p *probe) *toolkit.Registry {
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	sleep := func(ctx context.Context, c *toolkit.Call) error {
		ms := c.Args.Int("ms", 0)
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	reg.Register(toolkit.Tool{Name: "echo", Description: "Echo the arguments.", Schema: json.RawMessage(objSchema),
		Concurrent: true, ReadOnly: true,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			p.enter(c.ID)
			defer p.leave(c.ID)
			if err := sleep(ctx, c); err != nil {
				return toolkit.Result{}, err
			}
			return toolkit.Result{Content: "echo " + string(c.Args.Canonical)}, nil
		}})
	reg.Register(toolkit.Tool{Name: "write", Description: "A sequential tool that changes things.", Schema: json.RawMessage(objSchema),
		Paths: func(a toolkit.Args) []string { return []string{a.String("path")} },
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			p.enter(c.ID)
			defer p.leave(c.ID)
			if err := sleep(ctx, c); err != nil {
				return toolkit.Result{}, err
			}
			return toolkit.Result{Content: "wrote " + c.Args.String("path")}, nil
		}})
	reg.Register(toolkit.Tool{Name: "read", Description: "Read a path.", Schema: json.RawMessage(objSchema),
		Concurrent: true, ReadOnly: true,
		Paths: func(a toolkit.Args) []string { return []string{a.String("path")} },
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			p.enter(c.ID)
			defer p.leave(c.ID)
			return toolkit.Result{Content: "read " + c.Args.String("path")}, nil
		}})
	reg.Register(toolkit.Tool{Name: "fresh", Description: "Never de-duplicated.", Schema: json.RawMessage(objSchema),
		Concurrent: true, ReadOnly: true, NoDedup: true,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			p.enter(c.ID)
			defer p.leave(c.ID)
			return toolkit.Result{Content: "fresh"}, nil
		}})
	reg.Register(toolkit.Tool{Name: "boom", Description: "Panics.", Concurrent: true, ReadOnly: true,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			p.enter(c.ID)
			defer p.leave(c.ID)
			panic("boom went the tool")
		}})
	reg.Register(toolkit.Tool{Name: "fail", Description: "Fails.", Concurrent: true, ReadOnly: true,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			return toolkit.Result{}, fmt.Errorf("disk on fire")
		}})
	reg.Register(toolkit.Tool{Name: "slowpoke", Description: "Honours its 50 ms timeout.", Schema: json.RawMessage(objSchema),
		Concurrent: true, ReadOnly: true, Timeout: 50 * time.Millisecond,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			p.enter(c.ID)
			defer p.leave(c.ID)
			<-ctx.Done()
			return toolkit.Result{}, ctx.Err()
		}})
	reg.Register(toolkit.Tool{Name: "stubborn", Description: "Ignores its context until released.",
		Concurrent: true, ReadOnly: true, Timeout: 30 * time.Millisecond,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			p.enter(c.ID)
			defer p.leave(c.ID)
			<-p.release
			return toolkit.Result{Content: "finally"}, nil
		}})
	return reg
}

type harness struct {
	t     *testing.T
	d     *Dispatcher
	p     *probe
	store cachestore.Store

	mu     sync.Mutex
	events []*messages.Event
	onEv   func(*messages.Event)
}

func newHarness(t *testing.T, mod func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, p: newProbe(), store: cachestore.NewMemory()}
	cfg := Config{
		Registry: testRegistry(h.p), Store: h.store, MaxConcurrency: 3,
		WatchdogGrace: 20 * time.Millisecond, CancelGrace: 50 * time.Millisecond,
		Events: func(e *messages.Event) {
			h.mu.Lock()
			h.events = append(h.events, e)
			f := h.onEv
			h.mu.Unlock()
			if f != nil {
				f(e)
			}
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.d = d
	t.Cleanup(func() {
		select {
		case <-h.p.release:
		default:
			close(h.p.release)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		_ = h.store.Close()
	})
	return h
}

func call(id, name, args string) *messages.ToolCall {
	return &messages.ToolCall{Id: id, Type: "function", Function: &messages.FunctionCall{Name: name, Arguments: args}}
}

func turn(session, run string, calls ...*messages.ToolCall) *messages.DispatchTurn {
	return &messages.DispatchTurn{Session: session, Run: run, Provider: toolkit.ProviderClaudeCode, Approve: ApproveAll,
		AutoLoadSchemas: true, Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: calls}}
}

func (h *harness) dispatch(t *messages.DispatchTurn) *messages.TurnResult {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := h.d.Dispatch(ctx, t)
	if err != nil {
		h.t.Fatalf("dispatch: %v", err)
	}
	return r
}

func statuses(r *messages.TurnResult) []string {
	var out []string
	for _, m := range r.Messages {
		out = append(out, m.ToolCallId+"="+m.Status)
	}
	return out
}

func (h *harness) eventKinds(callID string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.events {
		if e.CallId == callID {
			out = append(out, e.Kind)
		}
	}
	return out
}

// settleBubble is called first in a synctest bubble that runs a
// dispatcher: a dead letter during shutdown starts protoactor's log
// throttle, a goroutine waiting on a one-second ticker, and a bubble must
// not end with it still waiting. The cleanup (run in the bubble after the
// harness's shutdown) moves the bubble's clock past that second.
func settleBubble(t *testing.T) {
	t.Cleanup(func() {
		time.Sleep(2 * time.Second)
		synctest.Wait()
	})
}
