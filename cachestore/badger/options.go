package badger

import (
	"errors"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/rs/zerolog"
)

// DefaultGCInterval is how often the value log is garbage-collected when
// Options.GCInterval is zero.
const DefaultGCInterval = 5 * time.Minute

// gcDiscardRatio is the share of stale data a value-log file needs before
// GC rewrites it.
const gcDiscardRatio = 0.5

// valueThreshold is the size from which a value goes to the value log and
// only a pointer to it to the LSM tree (on disk; in memory everything stays
// in the LSM tree). Turn records, intents and cached pages are mostly above
// it, meta and run-state entries mostly below: the LSM tree stays small and
// flushes and compactions do not copy whole turns around. With 25 KB turn
// records from 64 sessions, 4 KiB instead of Badger's 1 MiB default made
// fsynced commits about 1.5 times faster with the default profile and about
// 5 times faster with the Small one.
const valueThreshold = 4 << 10

// Sizes of the Small profile (see Options.Small): about 5 MB of heap
// per open DB instead of about 86 MB.
const (
	smallMemTableSize    = 4 << 20 // valueThreshold must stay below 15 % of it
	smallValueLogFile    = 16 << 20
	inMemoryMemTableSize = 8 << 20
	inMemoryValueLimit   = 1 << 20 // Badger's cap on the value threshold
	tinyFileSize         = 1 << 20 // Badger's smallest value-log file
)

// Options configures Open. The zero value is not valid: set Dir
// or InMemory.
type Options struct {
	// Dir is the data directory; required unless InMemory. A directory can be
	// open in one process at a time.
	Dir string
	// InMemory keeps everything in memory (Dir must be empty). Each value
	// (a turn record, an intent, a cached value, a file version) is then
	// limited to 1 MiB.
	InMemory bool
	// SyncWrites fsyncs every commit before it returns, so committed turns
	// survive a power loss and not only a killed process. Default false.
	// Concurrent commits share one fsync.
	SyncWrites bool
	// Small uses small memtables, caches and value-log files: the DB opens in
	// milliseconds and holds about 5 MB of heap, and a single value (a file
	// version, a cached page) may not exceed 16 MiB. For tests and the
	// command line; a long-running service wants the default (false).
	Small bool
	// GCInterval is how often value-log garbage collection runs: zero means
	// DefaultGCInterval, a negative value disables it. Unused when InMemory.
	GCInterval time.Duration
	// Logger receives the store's and Badger's logs. The zero value discards
	// them.
	Logger zerolog.Logger

	// tinyFiles makes value-log files and memtables as small as Badger
	// allows (1 MiB), so that a test crashing the store at random points
	// meets file rotations, flushes and compactions often.
	tinyFiles bool
}

// TestOptions returns the Small options for a DB in dir (in memory when dir
// is empty), so a test opens one in milliseconds.
func TestOptions(dir string) Options {
	return Options{Dir: dir, InMemory: dir == "", Small: true, Logger: zerolog.Nop()}
}

// Validate reports the first invalid field.
func (o Options) Validate() error {
	switch {
	case o.InMemory && o.Dir != "":
		return errors.New("badger: Options.Dir must be empty when InMemory is set")
	case !o.InMemory && o.Dir == "":
		return errors.New("badger: Options.Dir is required unless InMemory is set")
	}
	return nil
}

// gcInterval returns the effective GC interval, 0 when GC is off.
func (o Options) gcInterval() time.Duration {
	switch {
	case o.InMemory || o.GCInterval < 0:
		return 0
	case o.GCInterval == 0:
		return DefaultGCInterval
	}
	return o.GCInterval
}

// badgerOptions translates o into Badger's options.
func (o Options) badgerOptions() badgerdb.Options {
	bo := badgerdb.DefaultOptions(o.Dir).
		WithInMemory(o.InMemory).
		WithSyncWrites(o.SyncWrites).
		WithLogger(badgerLogger{o.Logger.With().Str("component", "badger").Logger()}).
		WithValueThreshold(valueThreshold)
	if o.Small {
		bo = bo.WithMemTableSize(smallMemTableSize).
			WithCompression(options.None).
			WithBlockCacheSize(0).
			WithIndexCacheSize(0).
			WithNumMemtables(1).
			WithNumLevelZeroTables(1).
			WithNumLevelZeroTablesStall(2).
			WithValueLogFileSize(smallValueLogFile).
			WithMetricsEnabled(false)
	}
	if o.tinyFiles {
		bo = bo.WithMemTableSize(tinyFileSize).WithValueLogFileSize(tinyFileSize)
	}
	if o.InMemory {
		// In memory every value stays under the threshold: raise it to the
		// most Badger allows, with a memtable big enough to hold it.
		if o.Small {
			bo = bo.WithMemTableSize(inMemoryMemTableSize)
		}
		bo = bo.WithValueThreshold(inMemoryValueLimit)
	}
	return bo
}
