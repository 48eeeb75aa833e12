package main

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/cachestore/space"
)

// byteSize is a size in bytes given as "64MiB", "1GB" or a plain number
// (--min-free, [store] min_free); set tells a given 0 from none.
type byteSize struct {
	n   uint64
	set bool
}

// Set implements flag.Value.
func (b *byteSize) Set(s string) error {
	n, err := humanize.ParseBytes(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not a size (e.g. 64MiB, 1GB, 0)", s)
	}
	b.n, b.set = n, true
	return nil
}

// String implements flag.Value.
func (b *byteSize) String() string {
	if b == nil || !b.set {
		return ""
	}
	return cachestore.Size(b.n)
}

// UnmarshalText reads a size from the configuration file.
func (b *byteSize) UnmarshalText(text []byte) error { return b.Set(string(text)) }

// storeConfig is the [store] section.
type storeConfig struct {
	// MinFree is the free-space reserve of the data folder's disk
	// (--min-free wins).
	MinFree byteSize `toml:"min_free"`
}

// storeOptions are the Badger options of the command's store.
func storeOptions(dir string, fsync bool, log zerolog.Logger) badger.Options {
	return badger.Options{Dir: dir, SyncWrites: fsync, Small: true, Logger: log}
}

// spaceGuard returns the free-space guard of the data folder: the reserve
// of --min-free, else [store] min_free, else what the store's files need
// (badger.SpaceNeeds); nil when the reserve is 0 (the check is off).
func spaceGuard(o *options, cfg *fileConfig, log zerolog.Logger) (*space.Guard, error) {
	reserve, floor := badger.SpaceNeeds(storeOptions(o.data, o.fsync, log))
	switch {
	case o.minFree.set:
		reserve = o.minFree.n
	case cfg.Store.MinFree.set:
		reserve = cfg.Store.MinFree.n
	}
	if reserve == 0 {
		log.Warn().Str("dir", o.data).Msg("the free-space reserve is off (--min-free 0): a full disk can stop the process")
		return nil, nil
	}
	if reserve < floor {
		// Below the floor a write can land in a page the disk cannot
		// give: the process would die of it (measured: a 1-byte reserve
		// on a full tmpfs, SIGBUS in Badger's value log).
		log.Warn().Str("dir", o.data).Str("asked", cachestore.Size(reserve)).Str("using", cachestore.Size(floor)).
			Msg("the free-space reserve is less than what the store needs to flush its memtable: using that")
		reserve = floor
	}
	return space.New(space.Options{Dir: o.data, Reserve: reserve, Floor: floor, Logger: log})
}

// shutdownStages tells, while a shutdown runs, what it is waiting for:
// what the log says when it does not end in time. Safe for concurrent use.
type shutdownStages struct {
	stage atomic.Pointer[string]
}

func (s *shutdownStages) set(stage string) { s.stage.Store(&stage) }

func (s *shutdownStages) current() string {
	if p := s.stage.Load(); p != nil {
		return *p
	}
	return "stopping"
}

// lastStoreError remembers the last error the store logged (Badger logs
// why it cannot flush or close, and retries): the reason a store that
// does not close is reported with. Safe for concurrent use.
type lastStoreError struct {
	mu  sync.Mutex
	msg string
}

// Run implements zerolog.Hook.
func (l *lastStoreError) Run(_ *zerolog.Event, level zerolog.Level, msg string) {
	if level >= zerolog.ErrorLevel && msg != "" {
		l.mu.Lock()
		l.msg = msg
		l.mu.Unlock()
	}
}

func (l *lastStoreError) get() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.msg
}

// closeBudget bounds what a shutdown takes after the grace: the canceled
// turns' commits, the HTTP replies, the last spans and closing the store
// (itself bounded by closeGrace).
const closeBudget = closeGrace + 5*time.Second

// stuckReason says why the stack's store may not close.
func (s *stack) stuckReason() string {
	dir, last := "", &lastStoreError{}
	if s.held != nil {
		dir, last = s.held.dir, s.held.lastErr
	}
	return stuckReason(dir, s.space, last)
}

// errStoreStuck: the store did not close within its budget.
var errStoreStuck = errors.New("it is still closing; the process exits without it")

// closeWithin runs closeFn and waits for it at most budget: a store that
// cannot close (Badger retrying a flush into a folder that has vanished)
// must not keep the process alive. The call left running ends with the
// process.
func closeWithin(budget time.Duration, closeFn func() error) error {
	done := make(chan error, 1)
	go func() { done <- closeFn() }()
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return errStoreStuck
	}
}

// stuckReason says why the store in dir may not close: what its folder's
// check finds, and the last error the store logged.
func stuckReason(dir string, g *space.Guard, last *lastStoreError) string {
	var why []string
	if g == nil && dir != "" {
		g, _ = space.New(space.Options{Dir: dir, Reserve: 1})
	}
	if g != nil {
		if st := g.Status(); st.Err != nil {
			why = append(why, st.Reason())
		}
	}
	if m := last.get(); m != "" {
		why = append(why, "the store's last error: "+m)
	}
	if len(why) == 0 {
		return "it gave no reason"
	}
	return strings.Join(why, "; ")
}

// watchShutdown ends the process with exitFailure when the shutdown begun
// now has not ended within bound, after logging what it was waiting for
// and why: a store that cannot close must not keep a stopped process
// alive. stop ends the watch.
func (e *env) watchShutdown(bound time.Duration, log zerolog.Logger, stages *shutdownStages, reason func() string) (stop func()) {
	t := time.AfterFunc(bound, func() {
		stage := stages.current()
		log.Error().Dur("bound", bound).Str("waiting_for", stage).Str("reason", reason()).
			Msg("the shutdown did not end in time; exiting without it")
		fmt.Fprintf(e.stderr, "tooldispatch: the shutdown did not end within %s (still %s: %s); exiting with status %d\n",
			bound, stage, reason(), exitFailure)
		if e.exitNow != nil {
			e.exitNow(exitFailure)
		}
	})
	return func() { t.Stop() }
}
