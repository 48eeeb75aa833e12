package mcp

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Sentinel errors. Call errors wrap them; use errors.Is.
var (
	// ErrClosed: the manager was closed.
	ErrClosed = errors.New("mcp: manager closed")
	// ErrUnavailable: the server is not connected right now (starting, or
	// restarting after a failure); the call was not sent.
	ErrUnavailable = errors.New("mcp: server unavailable")
	// ErrServerFailed: the connection to the server broke during the call
	// (the process died, the endpoint went away); the call's outcome is
	// unknown and the server is being restarted.
	ErrServerFailed = errors.New("mcp: server failed during the call")
	// ErrStarted: Start was called twice, or after Close.
	ErrStarted = errors.New("mcp: manager already started or closed")
	// ErrFailedServer: the server is marked failed (StateFailed) and is not
	// restarted; its tools are withdrawn. The call was not sent.
	ErrFailedServer = errors.New("mcp: server failed")
)

// Restart back-off defaults.
const (
	// restartInitial is the wait before the first restart of a failed
	// server; each further failure doubles it.
	restartInitial = 500 * time.Millisecond
	// restartMax caps the wait between restarts.
	restartMax = 30 * time.Second
	// restartHealthy: a session that lived this long resets the back-off.
	restartHealthy = time.Minute
)

// backoff is the restart policy.
type backoff struct {
	initial, max, healthy time.Duration
}

// delay returns the wait before restart number attempt (0 for the first).
func (b backoff) delay(attempt int) time.Duration {
	d := b.initial
	for i := 0; i < attempt && d < b.max; i++ {
		d *= 2
	}
	return min(d, b.max)
}

// hooks observe a server's life in tests; each is called from the server's
// goroutine and may be nil.
type hooks struct {
	// synced: the server's tools were (re)listed and the registry updated.
	synced func(server string)
	// retry: the server failed (err) and is retried after delay.
	retry func(server string, delay time.Duration, err error)
	// up: a session is connected; pid is the process id of a stdio server.
	up func(server string, pid int)
	// call: a call of tool is about to be sent to the process pid (0 for
	// a server without a process); called on the caller's goroutine.
	call func(server, tool string, pid int)
	// probe: a ping that checks whether the server still answers is sent.
	probe func(server string)
	// hung: the server left a ping unanswered for after.
	hung func(server string, after time.Duration)
	// failed: the server broke a bound (err) and is marked failed for good;
	// its process is stopped.
	failed func(server string, err error)
	// clock replaces time.Now in the flood budget's windows.
	clock func() time.Time
	// floodMessages, when set, replaces the flood budget's floodMessages.
	floodMessages int
}

// Manager runs the configured MCP servers and keeps their tools in a
// registry. Start, Close, Servers and the registered tools' handlers are
// safe for concurrent use.
type Manager struct {
	// immutable after NewManager
	reg     *toolkit.Registry
	servers []*server
	cfgErr  error
	log     zerolog.Logger
	policy  backoff
	hooks   hooks // tests set it before Start

	// ctx ends when Close begins; every server goroutine and every call
	// watches it. Created by NewManager, cancelled by Close.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the server goroutines

	mu      sync.Mutex
	started bool // guarded by mu
	closed  bool // guarded by mu

	// redactor takes secret values out of what servers send that we log
	// (their log notifications); nil: none. Immutable after NewManager.
	redactor toolkit.Redactor
}

// Option adjusts a Manager.
type Option func(*Manager)

// WithRedactor takes secret values out of what the servers send before it
// is logged (their log notifications). Tool results are redacted with
// each call's own redactor.
func WithRedactor(r toolkit.Redactor) Option {
	return func(m *Manager) { m.redactor = r }
}

// now is the time the manager's bounds count with.
func (m *Manager) now() time.Time {
	if m.hooks.clock != nil {
		return m.hooks.clock()
	}
	return time.Now()
}

// redact takes secret values out of s.
func (m *Manager) redact(s string) string {
	if m.redactor == nil {
		return s
	}
	return m.redactor.Redact(s)
}

// NewManager returns a manager of servers that registers their tools in
// reg. It starts nothing: call Start. A configuration mistake (see
// Config.Validate) is reported by Start.
func NewManager(reg *toolkit.Registry, servers []ServerConfig, logger zerolog.Logger, opts ...Option) *Manager {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		reg:     reg,
		cfgErr:  Config{Servers: servers}.Validate(),
		log:     logger.With().Str("component", "mcp").Logger(),
		policy:  backoff{initial: restartInitial, max: restartMax, healthy: restartHealthy},
		ctx:     ctx,
		cancel:  cancel,
		servers: make([]*server, 0, len(servers)),
	}
	for _, o := range opts {
		o(m)
	}
	for _, cfg := range servers {
		m.servers = append(m.servers, newServer(m, cfg))
	}
	return m
}

// Start connects every server and registers its tools. It returns when each
// server has connected and listed its tools, or failed its first attempt,
// or when ctx ends (then with ctx's error; the servers keep starting in the
// background). A first attempt is bounded by the server's ConnectTimeout,
// and a listing by the bounds of limits.go, so one server cannot hold up
// the others: a server that fails is marked failed (StateFailed), with the
// reason in its status and the log, and none of its tools registered. One
// that crashed or timed out is retried with exponential back-off until
// Close; one that broke a bound is not retried. Neither is an error of
// Start, which fails only on a configuration mistake, or when called twice
// or after Close.
func (m *Manager) Start(ctx context.Context) error {
	if m.cfgErr != nil {
		return m.cfgErr
	}
	m.mu.Lock()
	if m.started || m.closed {
		m.mu.Unlock()
		return ErrStarted
	}
	m.started = true
	firsts := make([]chan struct{}, len(m.servers))
	for i, s := range m.servers {
		firsts[i] = make(chan struct{})
		m.wg.Add(1)
		go s.run(firsts[i])
	}
	m.mu.Unlock()

	for _, first := range firsts {
		select {
		case <-first:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close stops every server: calls in flight are cancelled, sessions are
// closed, processes are terminated (SIGTERM after a short wait, then
// SIGKILL, process group included), and every goroutine of the manager has
// ended when it returns. The servers' tools are removed from the registry.
// Close is idempotent.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()

	m.cancel()
	m.wg.Wait()
	for _, s := range m.servers {
		s.closeTools()
	}
	return nil
}

// State is where a server is in its life.
type State string

// Server states.
const (
	// StateStarting: the first connection attempt is under way.
	StateStarting State = "starting"
	// StateFailed: the server failed at start-up (it exited, did not
	// answer within ConnectTimeout, or sent a listing that does not decode)
	// and is retried at NextAttempt; or it broke a bound (a listing over
	// maxListPages, maxListTools or maxListBytes, a message over
	// maxMessageBytes, a flood) and is not retried: NextAttempt is zero.
	// Its tools are not registered; calls that waited for it end "not
	// sent".
	StateFailed State = "failed"
	// StateUp: connected; its tools answer.
	StateUp State = "up"
	// StateRestarting: the server failed and is waiting for, or making, its
	// next connection attempt; calls wait for it up to their own time,
	// then end "not sent" (ErrUnavailable).
	StateRestarting State = "restarting"
	// StateClosed: the manager was closed.
	StateClosed State = "closed"
)

// ServerStatus describes one server.
type ServerStatus struct {
	// Name is the configured name; Prefix the start of its tool names.
	Name   string
	Prefix string
	State  State
	// Tools is how many of its tools are registered.
	Tools int
	// Restarts counts the failures after the server was first up: lost
	// sessions and failed reconnection attempts.
	Restarts int
	// LastError is the most recent failure ("" when none).
	LastError string
	// NextAttempt is when a restarting or failed server tries again; zero
	// when it is not retried.
	NextAttempt time.Time
	// Skipped are the tools of the server's listing that are not
	// registered, with the reason.
	Skipped []SkippedTool
	// Protocol is the MCP revision the session speaks ("2026-07-28",
	// "2025-11-25", …); "" while there is no session.
	Protocol string
}

// SkippedTool is a tool a server lists that is not registered.
type SkippedTool struct {
	// Tool is the tool's name as the server gives it.
	Tool string
	// Reason says why it is not registered.
	Reason string
}

// Servers reports every server's state, in configuration order.
func (m *Manager) Servers() []ServerStatus {
	out := make([]ServerStatus, 0, len(m.servers))
	for _, s := range m.servers {
		out = append(out, s.status())
	}
	return out
}
