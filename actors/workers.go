package actors

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// maxIdleWorkers is the most idle goroutines a workerDispatcher keeps for
// the next mailbox run; a worker that finds this many idle exits.
const maxIdleWorkers = 128

// workerThroughput is how many messages a mailbox run handles before it
// yields (protoactor's default dispatcher's figure).
const workerThroughput = 300

// workerDispatcher runs actors' mailboxes on goroutines it keeps between
// runs, instead of protoactor's default of a new goroutine per mailbox run.
// A new goroutine starts with a small stack and grows it by copying as the
// run goes deep (a turn's pass 1, a store call, protoactor's own frames):
// a hand-off to an idle actor measured 2.1 µs with a shallow Receive and
// 12.4 µs with one using 16 KiB of stack (BenchmarkPrimHandOff), and a
// one-call turn makes about 14 of them. A kept goroutine has grown its
// stack already and is woken with a channel send.
//
// Schedule never blocks and never waits for a worker: with none idle it
// starts a goroutine, as the default dispatcher does, so an actor whose
// Receive blocks (a call actor running a tool, the commit actor waiting on
// the store) holds only its own goroutine. At most maxIdleWorkers are kept
// idle; close lets them go (a run scheduled afterwards gets a goroutine of
// its own, which ends with it). Safe for concurrent use.
type workerDispatcher struct {
	mu     sync.Mutex
	idle   []chan func() // guarded by mu: parked workers, most recently parked last
	closed bool          // guarded by mu
}

var _ actor.Dispatcher = (*workerDispatcher)(nil)

func newWorkerDispatcher() *workerDispatcher { return &workerDispatcher{} }

// Schedule runs fn (a mailbox run) on an idle worker, or on a new one.
func (d *workerDispatcher) Schedule(fn func()) {
	d.mu.Lock()
	if n := len(d.idle); n > 0 {
		w := d.idle[n-1]
		d.idle[n-1] = nil
		d.idle = d.idle[:n-1]
		d.mu.Unlock()
		w <- fn // buffered: the worker is parked on it, or about to be
		return
	}
	d.mu.Unlock()
	go d.work(fn)
}

// Throughput is how many messages a mailbox run handles before it yields.
func (d *workerDispatcher) Throughput() int { return workerThroughput }

// work runs fn, then waits for the next run while the dispatcher keeps it.
func (d *workerDispatcher) work(fn func()) {
	var w chan func()
	for {
		fn()
		d.mu.Lock()
		if d.closed || len(d.idle) >= maxIdleWorkers {
			d.mu.Unlock()
			return
		}
		if w == nil {
			w = make(chan func(), 1)
		}
		d.idle = append(d.idle, w)
		d.mu.Unlock()
		if fn = <-w; fn == nil {
			return // closed
		}
	}
}

// close ends the idle workers and keeps none from now on.
func (d *workerDispatcher) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for _, w := range d.idle {
		close(w)
	}
	d.idle = nil
}
