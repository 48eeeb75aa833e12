package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/seam"
)

// Fault kinds.
const (
	// DiskFull refuses a write before anything is written, as a store on a
	// full disk does: the error matches cachestore.ErrNoSpace.
	DiskFull = "disk_full"
	// WriteError fails a write before anything is written (an I/O error).
	WriteError = "write_error"
	// SyncError applies the write, then reports it failed, as a failing
	// fsync does: the caller cannot tell whether it is durable.
	SyncError = "sync_error"
	// SlowSync applies the write, then returns after Delay (a slow fsync).
	SlowSync = "slow_fsync"
	// Stall holds the operation before it runs, for Delay or, when Delay is
	// zero, until Release; it then runs. When the caller's context ends
	// first, nothing is written and the context's error is returned.
	Stall = "stall"
	// ReadError fails a read.
	ReadError = "read_error"
)

// Kinds lists the fault kinds.
var Kinds = []string{DiskFull, WriteError, SyncError, SlowSync, Stall, ReadError}

// ErrInjected is matched (errors.Is) by every injected failure.
var ErrInjected = errors.New("injected storage fault")

// Fault is one fault to inject.
type Fault struct {
	Kind string
	// Delay of SlowSync and Stall.
	Delay time.Duration
}

// Error is the error of an injected failure: it matches ErrInjected, and
// cachestore.ErrNoSpace for DiskFull.
type Error struct {
	Fault Fault
	Op    seam.Op
}

func (e *Error) Error() string {
	what := e.Op.Kind.String()
	if e.Op.Session != "" {
		what += fmt.Sprintf(" of session %q", e.Op.Session)
	}
	if e.Op.Turn > 0 {
		what += fmt.Sprintf(" turn %d", e.Op.Turn)
	}
	text := map[string]string{
		DiskFull: "no space left on device", WriteError: "input/output error", SyncError: "fsync failed after the write",
		ReadError: "input/output error",
	}[e.Fault.Kind]
	return fmt.Sprintf("%s: %s (%s injected)", what, text, e.Fault.Kind)
}

// Is matches ErrInjected, and cachestore.ErrNoSpace for a full disk.
func (e *Error) Is(target error) bool {
	return target == ErrInjected || (target == cachestore.ErrNoSpace && e.Fault.Kind == DiskFull)
}

// Rule injects Fault into operations of the listed kinds: the Nth one that
// matches (counted from 1 since the rule was set) and the Count-1 after it.
type Rule struct {
	// Ops are the kinds the rule matches; empty means every write, or every
	// read for a ReadError.
	Ops []seam.Kind
	// Session, when set, limits the rule to the operations of one session.
	Session string
	// Nth is the first matching operation that gets the fault (0 or 1: the
	// first).
	Nth int
	// Count is how many get it from the Nth on: 0 means one, a negative
	// number every one.
	Count int
	Fault Fault
}

// Injected is one injected fault.
type Injected struct {
	Op    seam.Op
	Fault Fault
	Time  time.Time
}

// Decide picks the fault of an operation for chaos mode: attempt counts
// the earlier operations of the same kind, session, run, turn and key (0
// for the first), so that a turn tried again is decided anew. The counts
// do not depend on operations of other sessions, so a decision drawn from
// them does not depend on how sessions interleave.
type Decide func(op *seam.Op, attempt int) (Fault, bool)

// Injector is a seam.Hook that injects faults. Safe for concurrent use.
type Injector struct {
	// OnInject, when set before use, is told of every injected fault, on
	// the caller's goroutine.
	OnInject func(Injected)
	// Now gives the time of Injected records; nil means time.Now.
	Now func() time.Time

	mu       sync.Mutex
	rules    []*ruleState          // guarded by mu
	decide   Decide                // guarded by mu
	turns    map[string]*turnCount // guarded by mu: attempts of each session's running turn, by session
	other    map[attemptKey]int    // guarded by mu: attempts of operations about no turn
	injected []Injected            // guarded by mu: the last maxInjected
	counts   map[string]int        // guarded by mu: injected faults by kind
	release  chan struct{}         // guarded by mu: closed by Release
	pending  map[*seam.Op]*pending // guarded by mu: faults drawn in Before, applied in After
}

type ruleState struct {
	Rule
	seen int
}

type attemptKey struct {
	kind    seam.Kind
	session string
	run     string
	turn    int64
	key     string
}

// turnCount counts the operations of one session's running turn: a
// session runs one turn at a time, and once a turn is committed no
// operation of it or of an earlier turn comes again, so the counts are
// dropped then.
type turnCount struct {
	byKey map[attemptKey]int
}

type pending struct{ f Fault }

// maxAttempts bounds the attempt counts kept for Decide, of operations
// about no turn and of sessions whose turn is not committed; past it they
// start again from zero.
const maxAttempts = 1 << 16

// maxInjected bounds the records Injected returns (the latest).
const maxInjected = 1 << 16

// New returns an injector with rules.
func New(rules ...Rule) *Injector {
	in := &Injector{release: make(chan struct{}), pending: map[*seam.Op]*pending{}, counts: map[string]int{}}
	in.Set(rules...)
	return in
}

// Wrap returns s with faults injected by in.
func (in *Injector) Wrap(s cachestore.Store) *seam.Store { return seam.Wrap(s, in) }

// Set replaces the rules (their counts start again).
func (in *Injector) Set(rules ...Rule) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rules = in.rules[:0]
	for _, r := range rules {
		in.rules = append(in.rules, &ruleState{Rule: r})
	}
}

// SetDecide sets the chaos-mode decision (nil: none).
func (in *Injector) SetDecide(d Decide) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.decide, in.turns, in.other = d, map[string]*turnCount{}, map[attemptKey]int{}
}

// Clear drops every rule and releases the stalled operations: the store
// works again.
func (in *Injector) Clear() {
	in.Set()
	in.Release()
}

// Release lets every stalled operation run, and the ones stalled later
// too, until Rearm.
func (in *Injector) Release() {
	in.mu.Lock()
	defer in.mu.Unlock()
	select {
	case <-in.release:
	default:
		close(in.release)
	}
}

// Rearm makes a Stall without delay hold again until the next Release.
func (in *Injector) Rearm() {
	in.mu.Lock()
	defer in.mu.Unlock()
	select {
	case <-in.release:
		in.release = make(chan struct{})
	default:
	}
}

// Injected returns the faults injected so far (the latest 65 536).
func (in *Injector) Injected() []Injected {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.injected)
}

// Count returns how many faults of kind were injected.
func (in *Injector) Count(kind string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.counts[kind]
}

// draw picks the fault of op, if any, and records it.
func (in *Injector) draw(op *seam.Op) (Fault, chan struct{}, bool) {
	in.mu.Lock()
	f, ok := in.drawLocked(op)
	release := in.release
	var rec Injected
	if ok {
		now := time.Now
		if in.Now != nil {
			now = in.Now
		}
		rec = Injected{Op: *op, Fault: f, Time: now()}
		if len(in.injected) == maxInjected {
			in.injected = slices.Delete(in.injected, 0, maxInjected/2)
		}
		in.injected = append(in.injected, rec)
		in.counts[f.Kind]++
	}
	in.mu.Unlock()
	if ok && in.OnInject != nil {
		in.OnInject(rec)
	}
	return f, release, ok
}

func (in *Injector) drawLocked(op *seam.Op) (Fault, bool) {
	var found *Fault
	for _, r := range in.rules {
		if !r.matches(op.Kind) || !applies(r.Fault.Kind, op.Kind) || (r.Session != "" && r.Session != op.Session) {
			continue
		}
		r.seen++
		first := max(r.Nth, 1)
		last := first + max(r.Count, 1) - 1
		if r.seen >= first && (r.Count < 0 || r.seen <= last) && found == nil {
			found = &r.Fault
		}
	}
	if found != nil {
		return *found, true
	}
	if in.decide == nil {
		return Fault{}, false
	}
	n := in.attemptLocked(op)
	f, ok := in.decide(op, n)
	return f, ok && applies(f.Kind, op.Kind)
}

// attemptLocked counts op among the operations with the same facts and
// returns how many came before it.
func (in *Injector) attemptLocked(op *seam.Op) int {
	k := attemptKey{op.Kind, op.Session, op.Run, op.Turn, op.Key}
	counts := in.other
	if op.Session != "" && op.Turn > 0 {
		tc := in.turns[op.Session]
		if tc == nil {
			if len(in.turns) >= maxAttempts {
				clear(in.turns)
			}
			tc = &turnCount{byKey: map[attemptKey]int{}}
			in.turns[op.Session] = tc
		}
		counts = tc.byKey
	} else if len(in.other) >= maxAttempts {
		clear(in.other)
	}
	n := counts[k]
	counts[k] = n + 1
	return n
}

// committed drops the attempt counts of a session whose turn was
// committed: its operations do not come again.
func (in *Injector) committed(op *seam.Op, err error) {
	if op.Kind != seam.CommitTurn || err != nil {
		return
	}
	in.mu.Lock()
	delete(in.turns, op.Session)
	in.mu.Unlock()
}

func (r *ruleState) matches(k seam.Kind) bool {
	if len(r.Ops) > 0 {
		return slices.Contains(r.Ops, k)
	}
	if r.Fault.Kind == ReadError {
		return !k.Write()
	}
	return k.Write()
}

// applies reports whether fault kind f does anything to an operation of
// kind k (a read fault to a read, the others to writes).
func applies(f string, k seam.Kind) bool {
	if f == ReadError {
		return !k.Write()
	}
	return k.Write()
}

// Before implements seam.Hook.
func (in *Injector) Before(ctx context.Context, op *seam.Op) error {
	f, release, ok := in.draw(op)
	if !ok {
		return nil
	}
	switch f.Kind {
	case DiskFull, WriteError, ReadError:
		return &Error{Fault: f, Op: *op}
	case Stall:
		var timeout <-chan time.Time
		if f.Delay > 0 {
			t := time.NewTimer(f.Delay)
			defer t.Stop()
			timeout, release = t.C, nil
		}
		select {
		case <-release:
		case <-timeout:
		case <-ctx.Done():
			return fmt.Errorf("%s stalled (%s injected): %w", op.Kind, Stall, ctx.Err())
		}
	case SyncError, SlowSync:
		in.mu.Lock()
		in.pending[op] = &pending{f: f}
		in.mu.Unlock()
	}
	return nil
}

// After implements seam.Hook.
func (in *Injector) After(ctx context.Context, op *seam.Op, err error) error {
	in.committed(op, err)
	in.mu.Lock()
	p := in.pending[op]
	delete(in.pending, op)
	in.mu.Unlock()
	if p == nil || err != nil {
		return err
	}
	if p.f.Kind == SyncError {
		return &Error{Fault: p.f, Op: *op}
	}
	t := time.NewTimer(p.f.Delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		// The write is applied; the caller stops waiting for its fsync.
		return fmt.Errorf("%s: fsync still running (%s injected): %w", op.Kind, SlowSync, ctx.Err())
	}
	return nil
}
