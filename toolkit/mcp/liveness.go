package mcp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A server's liveness is checked with pings, by serve:
//   - every PingInterval (keep-alive), answered within HangTimeout (or
//     PingInterval/2 when the hang check is off);
//   - every HangTimeout/2 while calls wait on it, answered within
//     HangTimeout;
//   - after a call failed in transport, answered within probeTimeout.
//
// While a ping is out no call is sent to the server: calls wait for the
// verdict. A server that does not answer is declared hung: nothing more is
// sent to its session, its process group is killed (a stopped process
// never reads what is written to it, and closing the session would wait
// for those writes), and it is restarted. The calls sent before the ping
// end with their outcome unknown; the calls that waited go to the
// replacement, or end "not sent" when their own time runs out first.
//
// A stdio server that reads nothing more of what it is sent is hung too,
// whatever it sends (it could go on sending requests whose answers queue
// with us): watchInput declares it hung when a write to it has waited
// HangTimeout.

// keepAliveTimeout is how long a keep-alive ping may go unanswered.
func (s *server) keepAliveTimeout() time.Duration {
	if s.cfg.HangTimeout > 0 {
		return s.cfg.HangTimeout
	}
	return s.cfg.PingInterval / 2
}

// newTicker ticks every d, or never when d is not positive.
func newTicker(d time.Duration) *time.Ticker {
	if d <= 0 {
		d = time.Duration(math.MaxInt64)
	}
	return time.NewTicker(d)
}

// probe pings the server on c and waits at most timeout for the answer.
// Calls wait while it is out. It returns nil when the server answered (an
// error response is an answer), and otherwise declares the server hung and
// returns why; why says when the ping was sent.
func (s *server) probe(c *conn, timeout time.Duration, why string) error {
	s.setProbing(true)
	defer s.setProbing(false)
	if h := s.m.hooks.probe; h != nil {
		h(s.name)
	}
	// The ping runs beside the wait: a write to a stopped process can block
	// past the context, so the bound is our own timer. The goroutine ends
	// when the session closes at the latest; end waits for it.
	ctx, cancel := context.WithTimeout(s.m.ctx, timeout)
	defer cancel()
	began := time.Now()
	answered := make(chan error, 1)
	c.syncs.Add(1)
	go func() {
		defer c.syncs.Done()
		answered <- c.session.Ping(ctx, nil)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var err error
	select {
	case err = <-answered:
		var werr *jsonrpc.Error
		if err == nil || errors.As(err, &werr) || s.m.ctx.Err() != nil {
			return nil
		}
	case <-timer.C:
		err = context.DeadlineExceeded
	case <-s.m.ctx.Done():
		return nil
	}
	// Nothing more goes to this session, from now on.
	s.mu.Lock()
	c.broken.Store(true)
	s.mu.Unlock()
	if h := s.m.hooks.hung; h != nil {
		h(s.name, time.Since(began))
	}
	// Closing the session waits for writes a stopped process never reads:
	// kill its process group first, so the session ends at once and the
	// calls waiting on it return.
	if pid := c.pid(); pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	return fmt.Errorf("MCP server %q did not answer a ping within %s %s; declared hung: %w", s.name, timeout, why, err)
}

// setProbing says whether a liveness ping is out, and wakes the calls that
// wait for its verdict.
func (s *server) setProbing(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probing = v
	s.signal()
}

// watchInput watches a stdio server's input while the session lasts, every
// HangTimeout/2: a write that has waited more than HangTimeout declares the
// server hung (the reason is c.stalled), and its process group is killed,
// which ends the session. Run with c.syncs counting it.
func (s *server) watchInput(c *conn) {
	defer c.syncs.Done()
	tick := time.NewTicker(s.cfg.HangTimeout / 2)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
			waited := c.stdio.input.blocked()
			if waited <= s.cfg.HangTimeout {
				continue
			}
			err := fmt.Errorf("the server reads nothing more (a write to it has waited %s); declared hung", waited.Round(time.Millisecond))
			c.stalled.Store(&err)
			s.mu.Lock()
			c.broken.Store(true)
			s.mu.Unlock()
			if h := s.m.hooks.hung; h != nil {
				h(s.name, waited)
			}
			c.kill()
			return
		}
	}
}

// stallError is why watchInput declared the server on c hung, or nil.
func (c *conn) stallError() error {
	if p := c.stalled.Load(); p != nil {
		return *p
	}
	return nil
}
