package mcp

import (
	"context"
	"net/http"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tooldispatch/tooldispatch/toolkit/internal/procgroup"
)

// conn is one session with the server.
type conn struct {
	session *mcp.ClientSession
	cmd     *exec.Cmd          // stdio servers
	stderr  *lineLogger        // stdio servers
	http    *http.Transport    // Streamable HTTP servers
	inproc  *mcp.ServerSession // in-process servers: the server's side
	done    chan struct{}      // closed when the session has ended
	waitErr error              // why it ended; read after done
	// meter counts what the server sends (stdio and HTTP servers).
	meter *meter
	// stdio is the transport of a stdio server.
	stdio *stdioTransport
	// tap sees what goes over a stdio or in-process session (tap.go); nil
	// for a Streamable HTTP one. Set when the session connects.
	tap *tap
	// stalled says why the server was declared hung by watchInput; set
	// before the process is killed.
	stalled atomic.Pointer[error]
	// stopHTTP cancels every request of an HTTP session.
	stopHTTP context.CancelFunc
	// syncs are the tool listings and pings serve runs beside its loop;
	// end waits for them after closing the session.
	syncs sync.WaitGroup
	// broken is set when a call failed in transport on this session, or the
	// session is over or declared hung: later calls wait for the next
	// session instead of being sent here. A server that answers the probe
	// after a failed call clears it. Changed with s.mu held.
	broken atomic.Bool

	// violated is closed when the server first breaks a bound; violation
	// says which, and is set before.
	violated    chan struct{}
	violation   error
	violateOnce sync.Once
}

func newConn() *conn {
	c := &conn{done: make(chan struct{}), violated: make(chan struct{})}
	c.meter = newMeter(func(err error) { c.violate(err) })
	return c
}

// violate records that the server broke a bound (err, an ErrOverLimit);
// serve then ends the session and the server is marked failed. Only the
// first call counts.
func (c *conn) violate(err error) {
	c.violateOnce.Do(func() {
		c.violation = err
		close(c.violated)
	})
}

// overLimit returns the bound the server broke, or nil.
func (c *conn) overLimit() error {
	select {
	case <-c.violated:
		return c.violation
	default:
		return nil
	}
}

// bound wraps an HTTP session's transport: responses are counted and
// bounded (boundedTransport), and kill cancels every request.
func (c *conn) bound(base http.RoundTripper) http.RoundTripper {
	ctx, cancel := context.WithCancel(context.Background())
	c.stopHTTP = cancel
	return &boundedTransport{base: base, meter: c.meter, ctx: ctx}
}

// pid returns the stdio server's process id, or 0.
func (c *conn) pid() int {
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// kill stops the session by force: the stdio server's process group is
// killed, every request of an HTTP session is cancelled, an in-process
// server's side is closed.
func (c *conn) kill() {
	if pid := c.pid(); pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	if c.stopHTTP != nil {
		c.stopHTTP()
	}
	if c.inproc != nil {
		_ = c.inproc.Close()
	}
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
	if c.stopHTTP != nil {
		c.stopHTTP()
	}
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
	if c.inproc != nil {
		_ = c.inproc.Close()
	}
}
