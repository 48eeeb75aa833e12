package service

import (
	"context"
	"sync"
)

// sessionGates lets one turn request per session talk to the dispatcher at
// a time, in arrival order. The dispatcher runs a session's turns one at a
// time anyway; holding the gate from subscribing to the session's events
// until the turn's result makes every event on that subscription the
// turn's own, so a streamed turn gets exactly its events. Safe for
// concurrent use.
type sessionGates struct {
	mu sync.Mutex
	m  map[string]*gate // guarded by mu
}

type gate struct {
	ch   chan struct{} // capacity 1: holding the gate is having sent to it
	refs int           // guarded by sessionGates.mu: holders and waiters
}

// acquire waits for the session's gate, in arrival order, until ctx ends.
func (g *sessionGates) acquire(ctx context.Context, session string) (release func(), err error) {
	g.mu.Lock()
	if g.m == nil {
		g.m = map[string]*gate{}
	}
	gt, ok := g.m[session]
	if !ok {
		gt = &gate{ch: make(chan struct{}, 1)}
		g.m[session] = gt
	}
	gt.refs++
	g.mu.Unlock()

	select {
	case gt.ch <- struct{}{}:
		var once sync.Once
		return func() {
			once.Do(func() {
				<-gt.ch
				g.unref(session, gt)
			})
		}, nil
	case <-ctx.Done():
		g.unref(session, gt)
		return nil, ctx.Err()
	}
}

func (g *sessionGates) unref(session string, gt *gate) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gt.refs--
	if gt.refs == 0 {
		delete(g.m, session)
	}
}
