package mcp

import (
	"fmt"
	"time"
)

// serve waits until the session ends, the server breaks a bound or the
// manager closes, listing the tools again when the server says its list
// changed (at most once per relistInterval) and checking that the server
// still answers (liveness.go). It returns why it stopped.
func (s *server) serve(c *conn) error {
	hang := newTicker(s.cfg.HangTimeout / 2)
	defer hang.Stop()
	keepAlive := newTicker(s.cfg.PingInterval)
	defer keepAlive.Stop()
	// A listing runs beside the loop: a server that stops answering during
	// it must still be caught by the hang check.
	listed := make(chan struct{}, 1)
	listing, owed := false, false
	nextList := time.Now().Add(relistInterval)
	for {
		var wake <-chan time.Time
		if owed && !listing {
			if d := time.Until(nextList); d > 0 {
				wake = time.After(d)
			} else {
				owed, listing = false, true
				nextList = time.Now().Add(relistInterval)
				c.syncs.Add(1)
				go func() {
					defer c.syncs.Done()
					s.sync(c)
					listed <- struct{}{}
				}()
			}
		}
		select {
		case <-c.done:
			if over := c.overLimit(); over != nil {
				return fmt.Errorf("MCP server %q: %w", s.name, over)
			}
			if err := c.stallError(); err != nil {
				return fmt.Errorf("MCP server %q: %w", s.name, err)
			}
			if c.waitErr != nil {
				return fmt.Errorf("MCP server %q ended the session: %w", s.name, c.waitErr)
			}
			return fmt.Errorf("MCP server %q ended the session", s.name)
		case <-c.violated:
			return fmt.Errorf("MCP server %q: %w", s.name, c.violation)
		case <-s.refresh:
			owed = true
		case <-listed:
			listing = false
		case <-wake:
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
	s.closeConn(c)
}

// closeConn closes the session of c, by force when the server does not let
// it close within closeGrace (a server that reads nothing more keeps our
// replies to its requests, and with them the session, from ending), and
// cleans up after it.
func (s *server) closeConn(c *conn) {
	closed := make(chan error, 1)
	go func() { closed <- c.session.Close() }()
	grace := time.NewTimer(closeGrace)
	defer grace.Stop()
	var err error
	select {
	case err = <-closed:
	case <-grace.C:
		s.log.Warn().Dur("grace", closeGrace).Msg("the MCP session did not close in time; stopping the server by force")
		c.kill()
		err = <-closed
	}
	if err != nil {
		s.log.Debug().Err(err).Msg("closing the MCP session")
	}
	<-c.done
	c.syncs.Wait()
	c.cleanup()
}
