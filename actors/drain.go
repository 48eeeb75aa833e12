package actors

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// drainBound is how long Close waits, after the grace, for the turns it
// canceled to commit: a tool that ignores its context cannot hold the
// member past it.
const drainBound = 5 * time.Second

// drainBoard follows the turns of the session actors a router hosts
// (cluster grains, whoever sent the turns), so that a member that shuts
// down can stop taking turns, wait for the running ones, and cancel those
// still running at the end of its grace. Safe for concurrent use.
type drainBoard struct {
	draining atomic.Bool // set by Close: hosted actors take no new turn

	mu      sync.Mutex
	busy    map[*actor.PID]int // guarded by mu: session actor → turns queued or running
	changed chan struct{}      // guarded by mu: closed and replaced when busy changes
}

func newDrainBoard() *drainBoard {
	return &drainBoard{busy: map[*actor.PID]int{}, changed: make(chan struct{})}
}

// set records how many turns the session actor pid has queued or running.
func (b *drainBoard) set(pid *actor.PID, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.busy[pid] == n {
		return
	}
	if n == 0 {
		delete(b.busy, pid)
	} else {
		b.busy[pid] = n
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

// idle returns whether no hosted turn is queued or running, and a channel
// closed at the next change.
func (b *drainBoard) idle() (bool, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.busy) == 0, b.changed
}

// wait waits until no hosted turn is queued or running, or ctx ends.
func (b *drainBoard) wait(ctx context.Context) error {
	for {
		idle, changed := b.idle()
		if idle {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// actors returns the session actors with turns.
func (b *drainBoard) actors() []*actor.PID {
	b.mu.Lock()
	defer b.mu.Unlock()
	pids := make([]*actor.PID, 0, len(b.busy))
	for pid := range b.busy {
		pids = append(pids, pid)
	}
	return pids
}

// drainCancel tells a hosted session actor that its member's grace ended:
// it cancels its running turn (whose calls commit as canceled) and hands
// its queued turns back untaken (*actor.DeadLetterResponse: the sender
// asks the session's next owner).
type drainCancel struct{}
