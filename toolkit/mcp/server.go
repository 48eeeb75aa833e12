package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/internal/procgroup"
)

// groupGrace bounds the wait for a killed server's process group to be gone.
const groupGrace = 500 * time.Millisecond

const (
	// terminateDuration is how long closing a stdio session waits for the
	// server to exit after its stdin closes, before SIGTERM, and again
	// before SIGKILL.
	terminateDuration = 500 * time.Millisecond
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

	mu       sync.Mutex
	state    State                 // guarded by mu
	changed  chan struct{}         // guarded by mu; closed and replaced at every change of state
	session  *mcp.ClientSession    // guarded by mu; set while StateUp
	conn     *conn                 // guarded by mu; the connection of session
	probing  bool                  // guarded by mu; a liveness ping is out on conn: calls wait for its verdict
	tools    map[string]registered // guarded by mu; by registered name
	lastErr  error                 // guarded by mu
	nextTry  time.Time             // guarded by mu
	restarts int                   // guarded by mu
}

// registered is one tool of the server in the registry.
type registered struct {
	mcpName  string
	readOnly bool
	schema   string
	desc     string
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
	}
}

// conn is one session with the server.
type conn struct {
	session *mcp.ClientSession
	cmd     *exec.Cmd          // stdio servers
	stderr  *lineLogger        // stdio servers
	http    *http.Transport    // Streamable HTTP servers
	inproc  *mcp.ServerSession // in-process servers: the server's side
	done    chan struct{}      // closed when the session has ended
	waitErr error              // why it ended; read after done
	// syncs are the tool listings and pings serve runs beside its loop;
	// end waits for them after closing the session.
	syncs sync.WaitGroup
	// broken is set when a call failed in transport on this session, or the
	// session is over or declared hung: later calls wait for the next
	// session instead of being sent here. A server that answers the probe
	// after a failed call clears it. Changed with s.mu held.
	broken atomic.Bool
}

// pid returns the stdio server's process id, or 0.
func (c *conn) pid() int {
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// run is the server's goroutine: it connects, serves until the session
// ends, and restarts with back-off until the manager closes. first is
// closed after the first attempt, successful or not.
func (s *server) run(first chan struct{}) {
	defer s.m.wg.Done()
	var once sync.Once
	firstDone := func() { once.Do(func() { close(first) }) }
	defer firstDone()

	ctx := s.m.ctx
	for attempt := 0; ; attempt++ {
		c, err := s.connect(ctx)
		if err == nil {
			s.setUp(c)
			s.sync(c.session)
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
		firstDone()
		delay := s.m.policy.delay(attempt)
		s.setDown(err, delay)
		s.log.Warn().Err(err).Dur("retry_in", delay).Msg("MCP server unavailable; restarting")
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

// connect starts the server (stdio) or opens the session (HTTP) and does
// the initialize handshake.
func (s *server) connect(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ConnectTimeout)
	defer cancel()
	c := &conn{done: make(chan struct{})}
	var transport mcp.Transport
	if s.cfg.Server != nil {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := s.cfg.Server.Connect(ctx, st, nil)
		if err != nil {
			return nil, fmt.Errorf("connecting to MCP server %q: %w", s.name, err)
		}
		c.inproc = ss
		transport = ct
	} else if len(s.cfg.Command) > 0 {
		cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
		cmd.Env = s.env()
		cmd.Dir = s.cfg.Dir
		c.stderr = &lineLogger{log: s.log}
		cmd.Stderr = c.stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.WaitDelay = waitDelay
		c.cmd = cmd
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: terminateDuration}
	} else {
		c.http = http.DefaultTransport.(*http.Transport).Clone()
		transport = &mcp.StreamableClientTransport{
			Endpoint:   s.cfg.URL,
			HTTPClient: &http.Client{Transport: &headerTransport{base: c.http, headers: s.cfg.Headers}},
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: clientName, Version: clientVersion()}, &mcp.ClientOptions{
		Logger: slog.New(zerolog.NewSlogHandler(s.log)),
		// No roots, sampling or elicitation: servers use their own
		// configuration (a filesystem server keeps its command-line roots).
		Capabilities:           &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { poke(s.refresh) },
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
	return c, nil
}

// serve waits until the session ends or the manager closes, refreshing the
// tools when the server says its list changed and checking that the server
// still answers (liveness.go). It returns why it stopped.
func (s *server) serve(c *conn) error {
	hang := newTicker(s.cfg.HangTimeout / 2)
	defer hang.Stop()
	keepAlive := newTicker(s.cfg.PingInterval)
	defer keepAlive.Stop()
	var syncing atomic.Bool
	resync := false
	var synced <-chan time.Time // polls for the end of a listing while one is owed
	for {
		if resync {
			synced = time.After(100 * time.Millisecond)
		} else {
			synced = nil
		}
		select {
		case <-c.done:
			if c.waitErr != nil {
				return fmt.Errorf("MCP server %q ended the session: %w", s.name, c.waitErr)
			}
			return fmt.Errorf("MCP server %q ended the session", s.name)
		case <-s.refresh:
			// Listing runs beside the loop: a server that stops answering
			// during it must still be caught by the hang check.
			if !syncing.Swap(true) {
				c.syncs.Add(1)
				go func() {
					defer c.syncs.Done()
					defer syncing.Store(false)
					s.sync(c.session)
				}()
			} else {
				resync = true
			}
		case <-synced:
			if resync && !syncing.Load() {
				resync = false
				poke(s.refresh)
			}
		case <-s.suspect:
			if err := s.probe(c, probeTimeout, "after a call failed in transport"); err != nil {
				return err
			}
			s.mu.Lock()
			c.broken.Store(false)
			s.signal()
			s.mu.Unlock()
		case <-hang.C:
			if s.inflight.Load() == 0 {
				continue
			}
			if err := s.probe(c, s.cfg.HangTimeout, "while calls waited"); err != nil {
				return err
			}
		case <-keepAlive.C:
			if err := s.probe(c, s.keepAliveTimeout(), "(keep-alive)"); err != nil {
				return err
			}
		case <-s.m.ctx.Done():
			return ErrClosed
		}
	}
}

// signal wakes the calls waiting for a change of state. Call with mu held.
func (s *server) signal() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// end closes a session and cleans up after it.
func (s *server) end(c *conn) {
	s.mu.Lock()
	s.session, s.conn = nil, nil
	if s.m.ctx.Err() != nil {
		s.state = StateClosed
	} else {
		s.state = StateRestarting
	}
	c.broken.Store(true)
	s.signal()
	s.mu.Unlock()
	if err := c.session.Close(); err != nil {
		s.log.Debug().Err(err).Msg("closing the MCP session")
	}
	<-c.done
	c.syncs.Wait()
	c.cleanup()
}

// cleanup stops whatever is left of the connection: the server's process
// group and idle HTTP connections.
func (c *conn) cleanup() {
	if c.cmd != nil && c.cmd.Process != nil {
		// The session reaped the leader; nothing it started may outlive it.
		procgroup.Stop(c.cmd.Process.Pid, groupGrace, syscall.SIGKILL)
	}
	if c.stderr != nil {
		c.stderr.flush()
	}
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
	if c.inproc != nil {
		_ = c.inproc.Close()
	}
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

func (s *server) setUp(c *conn) {
	s.mu.Lock()
	s.session, s.conn = c.session, c
	s.state = StateUp
	s.signal()
	s.mu.Unlock()
	s.log.Info().Int("pid", c.pid()).Msg("MCP server connected")
	if h := s.m.hooks.up; h != nil {
		h(s.name, c.pid())
	}
}

func (s *server) setDown(err error, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != StateStarting {
		s.state = StateRestarting
		s.restarts++
	}
	s.lastErr = err
	s.nextTry = time.Now().Add(delay)
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
	if s.state == StateStarting {
		return nil, fmt.Errorf("MCP server %q is starting (next attempt %s)%s; call the tool again shortly: %w", s.name, wait, why, ErrUnavailable)
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
	if s.state == StateRestarting || s.state == StateStarting {
		st.NextAttempt = s.nextTry
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

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

// RoundTrip sends req with the headers.
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) == 0 {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.base.RoundTrip(req)
}

// clientVersion is the module version of the running program.
func clientVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}
