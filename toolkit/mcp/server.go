package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/internal/hostform"
)

// groupGrace bounds the wait for a killed server's process group to be gone.
const groupGrace = 500 * time.Millisecond

const (
	// terminateDuration is how long closing a stdio session waits for the
	// server to exit after its stdin closes, before SIGTERM, and again
	// before SIGKILL.
	terminateDuration = 500 * time.Millisecond
	// closeGrace bounds how long closing a session may take (the stdio
	// shutdown takes up to 2 × terminateDuration) before the server is
	// stopped by force.
	closeGrace = 2*terminateDuration + 500*time.Millisecond
	// waitDelay bounds how long reaping a stdio server waits for its
	// stderr to close when a descendant keeps it open; it is shorter than
	// terminateDuration so that closing the session sees the server reaped.
	waitDelay = 250 * time.Millisecond
	// probeTimeout bounds the ping that checks a session after a call
	// failed in transport.
	probeTimeout = 2 * time.Second
	// defaultPath is a server's PATH when we have none.
	defaultPath = "/usr/local/bin:/usr/bin:/bin"
	// clientName is how the client introduces itself to servers.
	clientName = "tooldispatch"
)

// server is one configured MCP server and its life: connect, list and
// register tools, serve calls, restart after failures.
type server struct {
	// immutable after newServer
	m       *Manager
	cfg     ServerConfig // defaults filled in
	name    string       // sanitised
	log     zerolog.Logger
	refresh chan struct{} // cap 1: the server said its tool list changed
	suspect chan struct{} // cap 1: a call failed in transport

	inflight atomic.Int64 // calls sent and not answered
	tokens   atomic.Int64 // progress tokens handed out
	logs     logGate      // the server's log notifications

	mu       sync.Mutex
	state    State                 // guarded by mu
	changed  chan struct{}         // guarded by mu; closed and replaced at every change of state
	session  *mcp.ClientSession    // guarded by mu; set while StateUp
	conn     *conn                 // guarded by mu; the connection of session
	probing  bool                  // guarded by mu; a liveness ping is out on conn: calls wait for its verdict
	tools    map[string]registered // guarded by mu; by registered name
	calls    map[string]*inflight  // guarded by mu; calls sent and not answered, by progress token
	skipped  []SkippedTool         // guarded by mu; of the last listing
	lastErr  error                 // guarded by mu
	nextTry  time.Time             // guarded by mu
	restarts int                   // guarded by mu
}

// registered is one tool of the server in the registry.
type registered struct {
	mcpName   string
	hints     hints
	schema    string
	outSchema string // "" when the tool declares none
	desc      string
}

func newServer(m *Manager, cfg ServerConfig) *server {
	name := SanitizeServerName(cfg.Name)
	return &server{
		m:       m,
		cfg:     cfg.withDefaults(),
		name:    name,
		log:     m.log.With().Str("server", name).Logger(),
		refresh: make(chan struct{}, 1),
		suspect: make(chan struct{}, 1),
		state:   StateStarting,
		changed: make(chan struct{}),
		tools:   map[string]registered{},
		calls:   map[string]*inflight{},
	}
}

// run is the server's goroutine: it connects, serves until the session
// ends, and restarts with back-off until the manager closes, or until the
// server breaks a bound (limits.go). first is closed after the first
// attempt, successful or not, once the server's state says how it went.
func (s *server) run(first chan struct{}) {
	defer s.m.wg.Done()
	var once sync.Once
	firstDone := func() { once.Do(func() { close(first) }) }
	defer firstDone()

	ctx := s.m.ctx
	for attempt := 0; ; attempt++ {
		c, list, err := s.open(ctx)
		if err == nil {
			s.setUp(c, list)
			firstDone()
			began := time.Now()
			err = s.serve(c)
			s.end(c)
			if ctx.Err() != nil {
				return
			}
			if time.Since(began) >= s.m.policy.healthy {
				attempt = 0
			}
		} else if ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrOverLimit) {
			s.setFailed(err)
			s.log.Error().Err(err).Msg("MCP server failed: it went over a limit; its tools are withdrawn and it is not restarted")
			if h := s.m.hooks.failed; h != nil {
				h(s.name, err)
			}
			return
		}
		delay := s.m.policy.delay(attempt)
		if s.setDown(err, delay) == StateFailed {
			s.log.Error().Err(err).Dur("retry_in", delay).Msg("MCP server failed at start-up; its tools are not registered; retrying")
		} else {
			s.log.Warn().Err(err).Dur("retry_in", delay).Msg("MCP server unavailable; restarting")
		}
		firstDone()
		if h := s.m.hooks.retry; h != nil {
			h(s.name, delay, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// open connects to the server and lists its tools, both within
// ConnectTimeout.
func (s *server) open(ctx context.Context) (*conn, []*mcp.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ConnectTimeout)
	defer cancel()
	c, err := s.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	list, err := s.listTools(ctx, c)
	if err != nil {
		s.closeConn(c)
		return nil, nil, fmt.Errorf("MCP server %q: %w", s.name, err)
	}
	return c, list, nil
}

// connect starts the server (stdio) or opens the session (HTTP) and does
// the initialize handshake, within ctx.
func (s *server) connect(ctx context.Context) (*conn, error) {
	c := newConn()
	if s.m.hooks.clock != nil {
		c.meter.now = s.m.hooks.clock
	}
	if s.m.hooks.floodMessages > 0 {
		c.meter.maxMessages = s.m.hooks.floodMessages
	}
	var transport mcp.Transport
	if s.cfg.Server != nil {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := s.cfg.Server.Connect(ctx, st, nil)
		if err != nil {
			return nil, fmt.Errorf("connecting to MCP server %q: %w", s.name, err)
		}
		c.inproc = ss
		transport = &tapTransport{base: ct, s: s, c: c}
	} else if len(s.cfg.Command) > 0 {
		cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
		cmd.Env = s.env()
		cmd.Dir = s.cfg.Dir
		c.stderr = &lineLogger{log: s.log}
		cmd.Stderr = c.stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.WaitDelay = waitDelay
		c.cmd = cmd
		c.stdio = &stdioTransport{cmd: cmd, meter: c.meter}
		transport = &tapTransport{base: c.stdio, s: s, c: c}
	} else {
		endpoint, err := s.cfg.endpoint()
		if err != nil {
			return nil, fmt.Errorf("connecting to MCP server %q: %w", s.name, err)
		}
		c.http = http.DefaultTransport.(*http.Transport).Clone()
		transport = &mcp.StreamableClientTransport{
			Endpoint:   endpoint.String(),
			HTTPClient: &http.Client{Transport: &headerTransport{base: c.bound(c.http), headers: s.cfg.Headers, endpoint: endpoint}},
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: clientName, Version: clientVersion()}, &mcp.ClientOptions{
		Logger: slog.New(zerolog.NewSlogHandler(s.log)),
		// No roots or sampling: servers use their own configuration (a
		// filesystem server keeps its command-line roots). Elicitation
		// (form mode) goes to the person behind the call (elicit.go).
		Capabilities:                &mcp.ClientCapabilities{},
		ElicitationHandler:          s.onElicit,
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { poke(s.refresh) },
		ProgressNotificationHandler: s.onProgress,
		//lint:ignore SA1019 logging is deprecated from 2026-07-28 only; servers of 2025-11-25 and older still log this way
		LoggingMessageHandler: s.onLog,
		// No KeepAlive: serve pings the server itself (liveness.go), so
		// that a server found dead is handled like a hung one.
	})
	sess, err := client.Connect(ctx, transport, nil)
	if err != nil {
		c.cleanup()
		if ctx.Err() != nil && s.m.ctx.Err() == nil {
			err = fmt.Errorf("no answer to initialize within %s: %w", s.cfg.ConnectTimeout, err)
		}
		return nil, fmt.Errorf("connecting to MCP server %q: %w", s.name, err)
	}
	c.session = sess
	go func() {
		c.waitErr = sess.Wait()
		close(c.done)
	}()
	if c.stdio != nil && s.cfg.HangTimeout > 0 {
		c.syncs.Add(1)
		go s.watchInput(c)
	}
	return c, nil
}

// signal wakes the calls waiting for a change of state. Call with mu held.
func (s *server) signal() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// env is a stdio server's environment: PATH, HOME and LANG, then the
// configured variables.
func (s *server) env() []string {
	vars := map[string]string{"PATH": defaultPath, "HOME": "/", "LANG": "C.UTF-8"}
	for k := range vars {
		if v := os.Getenv(k); v != "" {
			vars[k] = v
		}
	}
	for k, v := range s.cfg.Env {
		vars[k] = v
	}
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// setUp registers list as the server's tools and marks it up on c.
func (s *server) setUp(c *conn, list []*mcp.Tool) {
	s.apply(list)
	s.mu.Lock()
	s.session, s.conn = c.session, c
	s.state = StateUp
	s.signal()
	s.mu.Unlock()
	s.log.Info().Int("pid", c.pid()).Msg("MCP server connected")
	if h := s.m.hooks.up; h != nil {
		h(s.name, c.pid())
	}
	if h := s.m.hooks.synced; h != nil {
		h(s.name)
	}
}

// setDown records a failed attempt, retried after delay, and returns the
// new state: failed while the server never came up, restarting after.
func (s *server) setDown(err error, delay time.Duration) State {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateStarting || s.state == StateFailed {
		s.state = StateFailed
	} else {
		s.state = StateRestarting
		s.restarts++
	}
	s.lastErr = err
	s.nextTry = time.Now().Add(delay)
	s.signal()
	return s.state
}

// setFailed marks the server failed for good (it broke a bound) and
// withdraws its tools.
func (s *server) setFailed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = StateFailed
	s.lastErr = err
	s.nextTry = time.Time{}
	for name := range s.tools {
		s.m.reg.Remove(name)
	}
	clear(s.tools)
	s.signal()
}

// await returns a live session for a call, waiting while the server starts
// or restarts and while a liveness ping is out, up to ctx. A call that gets
// none was not sent.
func (s *server) await(ctx context.Context) (*mcp.ClientSession, *conn, error) {
	for {
		sess, err := s.current()
		s.mu.Lock()
		changed, c, probing := s.changed, s.conn, s.probing
		s.mu.Unlock()
		if err == nil && c != nil && !c.broken.Load() && !probing {
			select {
			case <-c.done:
				// The session is over but serve has not noticed yet.
			default:
				return sess, c, nil
			}
		} else if err != nil && !errors.Is(err, ErrUnavailable) {
			return nil, nil, fmt.Errorf("%w (%w)", err, toolkit.ErrNotSent)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, nil, s.notSent(ctx)
		}
	}
}

// notSent explains a call that waited for the server in vain.
func (s *server) notSent(ctx context.Context) error {
	_, err := s.current()
	if err == nil {
		err = fmt.Errorf("MCP server %q: its session ended", s.name)
	}
	return fmt.Errorf("not sent: %w; the call waited for the server until %v and did not run, so it is safe to retry (%w)", err, context.Cause(ctx), toolkit.ErrNotSent)
}

// current returns the session for a call, or why there is none.
func (s *server) current() (*mcp.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case StateUp:
		return s.session, nil
	case StateClosed:
		return nil, fmt.Errorf("MCP server %q is shut down: %w", s.name, ErrClosed)
	case StateFailed:
		if s.nextTry.IsZero() {
			return nil, fmt.Errorf("MCP server %q failed and is not restarted (%v); its tools are withdrawn: %w", s.name, s.lastErr, ErrFailedServer)
		}
	}
	if s.m.ctx.Err() != nil {
		return nil, fmt.Errorf("MCP server %q is shut down: %w", s.name, ErrClosed)
	}
	wait := "now"
	if d := time.Until(s.nextTry); d > 0 {
		wait = "in " + d.Round(time.Millisecond).String()
	}
	why := ""
	if s.lastErr != nil {
		why = " after: " + s.lastErr.Error()
	}
	switch s.state {
	case StateStarting:
		return nil, fmt.Errorf("MCP server %q is starting (next attempt %s)%s; call the tool again shortly: %w", s.name, wait, why, ErrUnavailable)
	case StateFailed:
		return nil, fmt.Errorf("MCP server %q failed at start-up (next attempt %s)%s: %w", s.name, wait, why, ErrUnavailable)
	}
	return nil, fmt.Errorf("MCP server %q is restarting (next attempt %s)%s; call the tool again shortly: %w", s.name, wait, why, ErrUnavailable)
}

func (s *server) status() ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ServerStatus{
		Name:     s.cfg.Name,
		Prefix:   toolPrefix + s.name + nameSep,
		State:    s.state,
		Tools:    len(s.tools),
		Restarts: s.restarts,
	}
	if s.lastErr != nil {
		st.LastError = s.lastErr.Error()
	}
	if s.state == StateRestarting || s.state == StateStarting || s.state == StateFailed {
		st.NextAttempt = s.nextTry
	}
	st.Skipped = slices.Clone(s.skipped)
	if s.session != nil {
		if r := s.session.InitializeResult(); r != nil {
			st.Protocol = r.ProtocolVersion
		}
	}
	return st
}

// closeTools removes the server's tools from the registry.
func (s *server) closeTools() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = StateClosed
	for name := range s.tools {
		s.m.reg.Remove(name)
	}
	clear(s.tools)
}

// poke sends a signal on a channel of capacity 1 without blocking.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// headerTransport adds the configured headers to every request to the
// endpoint's origin; a request elsewhere (after a redirect) goes without
// them.
type headerTransport struct {
	base     http.RoundTripper
	headers  map[string]string
	endpoint *url.URL // host in its one form
}

// RoundTrip sends req, with the headers when it goes to the endpoint's
// origin.
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) == 0 || !sameOrigin(req.URL, t.endpoint) {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.base.RoundTrip(req)
}

// sameOrigin reports whether u has the scheme, host (in its one form) and
// port (explicit or the scheme's default) of endpoint.
func sameOrigin(u, endpoint *url.URL) bool {
	n, err := hostform.URL(u)
	if err != nil || !strings.EqualFold(u.Scheme, endpoint.Scheme) || n.Hostname() != endpoint.Hostname() {
		return false
	}
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "https") {
			return "443"
		}
		return "80"
	}
	return port(n) == port(endpoint)
}

// clientVersion is the module version of the running program.
func clientVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}
