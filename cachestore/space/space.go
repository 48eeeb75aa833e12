package space

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/seam"
)

// Options configures a Guard.
type Options struct {
	// Dir is the data folder; required.
	Dir string
	// Reserve is the free space below which no new turn is admitted;
	// required (cachestore/badger.SpaceNeeds gives the store's).
	Reserve uint64
	// Floor is the free space no write may take: a write is refused when
	// what is free, less the writes under way, is below its size plus the
	// floor. Default Reserve/4; at most Reserve.
	Floor uint64
	// Free returns the bytes free for the store on the file system holding
	// dir; nil means statfs (the blocks available to the process).
	Free func(dir string) (uint64, error)
	// Logger receives a line each time the folder goes below the reserve
	// and each time it is back above it. The zero value logs nothing.
	Logger zerolog.Logger
	// OnChange, when set, is called with the new status each time the
	// folder goes below the reserve (or cannot be checked) and each time it
	// is back above it, on the goroutine that saw it.
	OnChange func(Status)
}

// Validate names the first bad field.
func (o *Options) Validate() error {
	switch {
	case o.Dir == "":
		return errors.New("space: Options.Dir is required")
	case o.Reserve == 0:
		return errors.New("space: Options.Reserve must be positive")
	case o.Floor > o.Reserve:
		return fmt.Errorf("space: Options.Floor (%d) must not exceed the reserve (%d)", o.Floor, o.Reserve)
	}
	return nil
}

// Status is what a check found.
type Status struct {
	Dir     string
	Free    uint64
	Reserve uint64
	// Low: Free is below Reserve, or the folder could not be checked.
	Low bool
	// Err is why the folder could not be checked (it vanished, its disk
	// failed); nil when it was.
	Err error
}

// Reason says in a sentence why a low status is low ("" when it is not).
func (s Status) Reason() string {
	switch {
	case s.Err != nil:
		return fmt.Sprintf("the data folder %s cannot be checked: %v", s.Dir, s.Err)
	case s.Low:
		return (&cachestore.NoSpaceError{Dir: s.Dir, Free: s.Free, Reserve: s.Reserve}).Error()
	}
	return ""
}

// Guard keeps the reserve. Safe for concurrent use.
type Guard struct {
	opts Options // immutable after New

	mu      sync.Mutex
	low     bool                // guarded by mu: the last check found the folder low
	checked bool                // guarded by mu: a check was made
	writing uint64              // guarded by mu: bytes of writes under way
	taken   map[*seam.Op]uint64 // guarded by mu: what each write under way took
}

// New returns a guard; it starts no goroutine.
func New(o Options) (*Guard, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Floor == 0 {
		o.Floor = o.Reserve / 4
	}
	if o.Free == nil {
		o.Free = statfsFree
	}
	return &Guard{opts: o, taken: map[*seam.Op]uint64{}}, nil
}

// statfsFree is the space statfs says the process may still use.
func statfsFree(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, &pathErr{op: "statfs", dir: dir, err: err}
	}
	return st.Bavail * uint64(st.Bsize), nil
}

type pathErr struct {
	op, dir string
	err     error
}

func (e *pathErr) Error() string { return e.op + " " + e.dir + ": " + e.err.Error() }
func (e *pathErr) Unwrap() error { return e.err }

// Reserve is the guard's reserve, Floor its floor, Dir its folder.
func (g *Guard) Reserve() uint64 { return g.opts.Reserve }

// Floor is the free space no write may take.
func (g *Guard) Floor() uint64 { return g.opts.Floor }

// Dir is the data folder the guard checks.
func (g *Guard) Dir() string { return g.opts.Dir }

// Status checks the folder now.
func (g *Guard) Status() Status {
	free, err := g.opts.Free(g.opts.Dir)
	st := Status{Dir: g.opts.Dir, Free: free, Reserve: g.opts.Reserve, Low: err != nil || free < g.opts.Reserve, Err: err}
	g.note(st)
	return st
}

// note logs and reports a change of st.Low.
func (g *Guard) note(st Status) {
	g.mu.Lock()
	changed := st.Low != g.low || (!g.checked && st.Low)
	g.low, g.checked = st.Low, true
	g.mu.Unlock()
	if !changed {
		return
	}
	log := g.opts.Logger
	if st.Low {
		log.Warn().Str("dir", st.Dir).Uint64("free_bytes", st.Free).Uint64("reserve_bytes", st.Reserve).AnErr("check_error", st.Err).
			Msg("the data folder is below its free-space reserve: new turns are refused, reads go on")
	} else {
		log.Warn().Str("dir", st.Dir).Uint64("free_bytes", st.Free).Uint64("reserve_bytes", st.Reserve).
			Msg("the data folder is back above its free-space reserve: turns are taken again")
	}
	if g.opts.OnChange != nil {
		g.opts.OnChange(st)
	}
}

// Admit returns nil when a new turn may start, a *cachestore.NoSpaceError
// when the folder is below the reserve, and an error matching
// cachestore.ErrNoSpace naming the folder when it cannot be checked.
func (g *Guard) Admit() error {
	st := g.Status()
	switch {
	case st.Err != nil:
		return &uncheckedError{status: st}
	case st.Low:
		return &cachestore.NoSpaceError{Dir: st.Dir, Free: st.Free, Reserve: st.Reserve}
	}
	return nil
}

// uncheckedError: the folder could not be checked (statfs failed).
type uncheckedError struct{ status Status }

func (e *uncheckedError) Error() string {
	return "no space for the store: " + e.status.Reason() + "; new turns are refused until it can (reads go on)"
}

func (e *uncheckedError) Is(target error) bool { return target == cachestore.ErrNoSpace }
func (e *uncheckedError) Unwrap() error        { return e.status.Err }

// Wrap returns s with its writes checked against the floor.
func (g *Guard) Wrap(s cachestore.Store) *seam.Store { return seam.Wrap(s, g) }

// Before implements seam.Hook: a write is refused when what is free, less
// the writes under way, is below its size plus the floor.
func (g *Guard) Before(_ context.Context, op *seam.Op) error {
	if !op.Kind.Write() || op.Bytes <= 0 {
		// Reads, deletions and the resolution of intents (RecoverAll) are
		// never refused: they free space or need little.
		return nil
	}
	need := uint64(op.Bytes)
	free, err := g.opts.Free(g.opts.Dir)
	if err != nil {
		g.note(Status{Dir: g.opts.Dir, Reserve: g.opts.Reserve, Low: true, Err: err})
		return &uncheckedError{status: Status{Dir: g.opts.Dir, Reserve: g.opts.Reserve, Low: true, Err: err}}
	}
	g.mu.Lock()
	avail := free - min(free, g.writing)
	if avail < need+g.opts.Floor {
		g.mu.Unlock()
		g.note(Status{Dir: g.opts.Dir, Free: free, Reserve: g.opts.Reserve, Low: free < g.opts.Reserve})
		return &cachestore.NoSpaceError{Dir: g.opts.Dir, Free: avail, Reserve: g.opts.Reserve, Need: need, Floor: g.opts.Floor}
	}
	g.writing += need
	g.taken[op] = need
	g.mu.Unlock()
	return nil
}

// After implements seam.Hook: the write's bytes are no longer under way
// (statfs counts them now). A store that ran out of space anyway (ENOSPC
// from a file write) is reported as ErrNoSpace.
func (g *Guard) After(_ context.Context, op *seam.Op, err error) error {
	g.mu.Lock()
	if n, ok := g.taken[op]; ok {
		g.writing -= n
		delete(g.taken, op)
	}
	g.mu.Unlock()
	if err != nil && errors.Is(err, syscall.ENOSPC) && !errors.Is(err, cachestore.ErrNoSpace) {
		return fmt.Errorf("%w: %w", cachestore.ErrNoSpace, err)
	}
	return err
}
