package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// ErrInjected is the error a FaultStore returns for an injected write failure.
var ErrInjected = errors.New("chaos: injected store write failure")

// FaultStore wraps a cachestore.Store and injects faults into its writes of
// turns (WriteIntent and CommitTurn). Reads pass through.
type FaultStore struct {
	cachestore.Store

	// FailWrites makes every WriteIntent and CommitTurn fail with ErrInjected
	// without touching the wrapped store.
	FailWrites atomic.Bool
	// FailCommits makes only CommitTurn fail.
	FailCommits atomic.Bool
	// StallNanos stalls every CommitTurn this long (or until its context
	// ends) before writing.
	StallNanos atomic.Int64
	// PanicCommits is how many of the next CommitTurn calls panic (before
	// writing anything).
	PanicCommits atomic.Int32

	Intents, Commits, Failed, Panics atomic.Int64
}

// NewFaultStore wraps s.
func NewFaultStore(s cachestore.Store) *FaultStore { return &FaultStore{Store: s} }

// WriteIntent implements cachestore.Store.
func (f *FaultStore) WriteIntent(ctx context.Context, in *cachestore.Intent) error {
	if f.FailWrites.Load() {
		f.Failed.Add(1)
		return ErrInjected
	}
	f.Intents.Add(1)
	return f.Store.WriteIntent(ctx, in)
}

// CommitTurn implements cachestore.Store.
func (f *FaultStore) CommitTurn(ctx context.Context, c *cachestore.TurnCommit) error {
	if d := time.Duration(f.StallNanos.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	if f.PanicCommits.Load() > 0 && f.PanicCommits.Add(-1) >= 0 {
		f.Panics.Add(1)
		panic("chaos: injected panic in CommitTurn")
	}
	if f.FailWrites.Load() || f.FailCommits.Load() {
		f.Failed.Add(1)
		return ErrInjected
	}
	f.Commits.Add(1)
	return f.Store.CommitTurn(ctx, c)
}

// Counter is a toolkit.Observer that counts final statuses and abandoned
// calls.
type Counter struct {
	toolkit.NopObserver
	mu        sync.Mutex
	statuses  map[string]int
	abandoned map[string]int
}

// NewCounter returns an empty Counter.
func NewCounter() *Counter {
	return &Counter{statuses: map[string]int{}, abandoned: map[string]int{}}
}

// CallDone implements toolkit.Observer.
func (c *Counter) CallDone(_, status string) {
	c.mu.Lock()
	c.statuses[status]++
	c.mu.Unlock()
}

// Abandoned implements toolkit.Observer.
func (c *Counter) Abandoned(tool string) {
	c.mu.Lock()
	c.abandoned[tool]++
	c.mu.Unlock()
}

// Status returns how many calls ended with status.
func (c *Counter) Status(s string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statuses[s]
}

// AbandonedOf returns how many calls of tool were abandoned.
func (c *Counter) AbandonedOf(tool string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.abandoned[tool]
}

// Stubborn is a tool body that ignores its context until Release is closed.
type Stubborn struct {
	Release chan struct{}
	Running atomic.Int64
}

// NewStubborn returns a Stubborn whose calls block until Release is closed.
func NewStubborn() *Stubborn { return &Stubborn{Release: make(chan struct{})} }

const openSchema = `{"type":"object","properties":{"n":{"type":"integer"},"x":{"type":"string"}},"additionalProperties":false}`

// Tools returns the faulty tools: panic (panics), hang (waits for its
// context; 150 ms timeout), stubborn (ignores its context; 100 ms timeout),
// flood (streams n pieces of 1 KiB and returns n KiB), echo (read-only,
// concurrent) and note (mutating, sequential; appends to *log).
func Tools(st *Stubborn, log *Log) []toolkit.Tool {
	schema := json.RawMessage(openSchema)
	return []toolkit.Tool{
		{Name: "panic", Description: "Panics.", Schema: schema, Concurrent: true, ReadOnly: true,
			Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) { panic("injected tool panic") }},
		{Name: "hang", Description: "Hangs until its context ends.", Schema: schema, Concurrent: true, ReadOnly: true,
			Timeout: 150 * time.Millisecond,
			Handler: func(ctx context.Context, _ *toolkit.Call) (toolkit.Result, error) {
				<-ctx.Done()
				return toolkit.Result{}, ctx.Err()
			}},
		{Name: "stubborn", Description: "Ignores cancellation.", Schema: schema, Concurrent: true, ReadOnly: true, NoDedup: true,
			Timeout: 100 * time.Millisecond,
			Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) {
				st.Running.Add(1)
				defer st.Running.Add(-1)
				<-st.Release
				return toolkit.Result{Content: "finally"}, nil
			}},
		{Name: "flood", Description: "Floods output.", Schema: schema, Concurrent: true, ReadOnly: true, NoDedup: true,
			Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
				n := int(c.Args.Int("n", 1024))
				piece := strings.Repeat("x", 1023) + "\n"
				var b strings.Builder
				for i := 0; i < n; i++ {
					if ctx.Err() != nil {
						return toolkit.Result{}, ctx.Err()
					}
					c.Emit(piece)
					b.WriteString(piece)
				}
				return toolkit.Result{Content: b.String()}, nil
			}},
		{Name: "echo", Description: "Echoes.", Schema: schema, Concurrent: true, ReadOnly: true,
			Handler: func(_ context.Context, c *toolkit.Call) (toolkit.Result, error) {
				return toolkit.Result{Content: "echo " + string(c.Args.Canonical)}, nil
			}},
		{Name: "note", Description: "Records its call id (mutating).", Schema: schema,
			Handler: func(_ context.Context, c *toolkit.Call) (toolkit.Result, error) {
				log.Add(c.ID)
				return toolkit.Result{Content: "noted " + c.ID}, nil
			}},
	}
}

// Log records executions (the in-process side file).
type Log struct {
	mu  sync.Mutex
	ids []string
}

// Add records one execution.
func (l *Log) Add(id string) {
	l.mu.Lock()
	l.ids = append(l.ids, id)
	l.mu.Unlock()
}

// IDs returns the recorded executions in order.
func (l *Log) IDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...)
}
