package mcp

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp/mcptest"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(mcptest.Env); mode != "" {
		// This process is a misbehaving MCP server a test started.
		os.Exit(mcptest.Serve(mode))
	}
	goleak.VerifyTestMain(m,
		// protoactor's dead-letter throttle goroutine outlives its actor
		// system (it waits on a ticker it never stops); host_test.go runs a
		// dispatcher.
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		// regexp2's match-timeout clock stops itself ~1 s after the last match.
		goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock"))
}

// waitLimit bounds every wait for a server event in these tests: a guard
// that turns a hang into a named failure, not a measure of speed. It is
// generous because the listing bounds' tests move megabytes through a
// server under -race, which took over 20 s on a loaded two-core machine
// (TestStartUpFailures/huge_pages: "Start: context deadline exceeded").
const waitLimit = 2 * time.Minute

// serverCommand is the argv of npm server pkg (server-everything…) run
// from its local install.
func serverCommand(t *testing.T, pkg string, args ...string) []string {
	t.Helper()
	return mcptest.Command(t, pkg, args...)
}

// syncBuffer is a log sink safe for the manager's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// events collects the manager's hook calls.
type events struct {
	synced chan string
	retry  chan retryEvent
	up     chan upEvent
	call   chan string
}

type retryEvent struct {
	server string
	delay  time.Duration
	err    error
}

type upEvent struct {
	server string
	pid    int
}

// harness is a manager under test with its registry, logs and events.
type harness struct {
	t   *testing.T
	m   *Manager
	reg *toolkit.Registry
	log *syncBuffer
	ev  *events
}

// newHarness builds a manager of servers; configure may adjust it before
// Start. The manager is closed when the test ends, and the logs are shown
// if it failed.
func newHarness(t *testing.T, servers []ServerConfig, configure ...func(*Manager)) *harness {
	t.Helper()
	logs := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager logs:\n%s", logs.String())
		}
	})
	reg := toolkit.NewRegistry()
	m := NewManager(reg, servers, zerolog.New(logs).Level(zerolog.DebugLevel).With().Timestamp().Logger())
	ev := &events{
		synced: make(chan string, 256),
		retry:  make(chan retryEvent, 256),
		up:     make(chan upEvent, 256),
		call:   make(chan string, 256),
	}
	m.hooks = hooks{
		synced: func(s string) { offer(ev.synced, s) },
		retry:  func(s string, d time.Duration, err error) { offer(ev.retry, retryEvent{s, d, err}) },
		up:     func(s string, pid int) { offer(ev.up, upEvent{s, pid}) },
		call:   func(s, tool string, _ int) { offer(ev.call, s+"/"+tool) },
	}
	for _, c := range configure {
		c(m)
	}
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() {
			m.Close()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(waitLimit):
			t.Errorf("Close did not return within %s", waitLimit)
		}
	})
	return &harness{t: t, m: m, reg: reg, log: logs, ev: ev}
}

func offer[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
	}
}

// start starts the manager and fails the test if that takes too long.
func (h *harness) start() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := h.m.Start(ctx); err != nil {
		h.t.Fatalf("Start: %v", err)
	}
}

// tool returns the registered tool name.
func (h *harness) tool(name string) *toolkit.Tool {
	h.t.Helper()
	tool, ok := h.reg.Lookup(name)
	if !ok {
		h.t.Fatalf("tool %s is not registered; registered: %s", name, strings.Join(h.names(""), ", "))
	}
	return tool
}

// names lists the registered tools whose names start with prefix.
func (h *harness) names(prefix string) []string {
	var out []string
	for _, tool := range h.reg.All() {
		if strings.HasPrefix(tool.Name, prefix) {
			out = append(out, tool.Name)
		}
	}
	return out
}

// call validates args against the tool's compiled schema, as the
// dispatcher does, and runs the tool.
func (h *harness) call(ctx context.Context, name, args string) (string, error) {
	h.t.Helper()
	tool := h.tool(name)
	a, err := toolkit.ParseArgs(args, toolkit.Limits{})
	if err != nil {
		h.t.Fatalf("arguments %s: %v", args, err)
	}
	sch, err := h.reg.Schemas.Compile(tool.Schema)
	if err != nil {
		h.t.Fatalf("schema of %s: %v", name, err)
	}
	if err := sch.Validate(a.Value); err != nil {
		h.t.Fatalf("arguments %s of %s: %v", args, name, err)
	}
	return h.run(ctx, tool, a)
}

// run calls the tool's handler under its timeout, as the dispatcher does.
func (h *harness) run(ctx context.Context, tool *toolkit.Tool, a toolkit.Args) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, tool.EffectiveTimeout())
	defer cancel()
	res, err := tool.Handler(ctx, &toolkit.Call{ID: "c1", Name: tool.Name, Args: a, Emit: func(string) {}})
	return res.Content, err
}

// waitUntil waits until cond holds, re-checking after every event on ch.
func waitUntil[T any](t *testing.T, what string, ch <-chan T, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// next returns the next event on ch.
func next[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out waiting for %s", what)
	}
	panic("unreachable")
}
