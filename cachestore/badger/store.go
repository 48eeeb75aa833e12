package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// Store is the embedded cachestore.Store, on github.com/dgraph-io/badger/v4.
// All methods are safe for concurrent use. Writes go through one committer
// goroutine that merges what concurrent sessions commit into one
// transaction; reads run on the caller's goroutine.
type Store struct {
	// immutable after Open
	db  *badgerdb.DB
	log zerolog.Logger
	now func() time.Time
	ops chan *writeOp
	// nextTurns is the committer's copy of sessions' next turn numbers, so
	// that validating an op does not read the session's meta key: the
	// committer is the only writer of meta keys, and it sets an entry only
	// after the transaction that wrote it is committed and drops it when a
	// write of the session fails. Owned by the committer goroutine.
	nextTurns map[string]int64

	// waiting is the number of entries of the index of what waits: set at
	// open, raised by the committer once a commit that adds approvals is
	// written and lowered once a settlement is, so that the committer,
	// which checks the cap of TurnCommit.MaxWaiting, never reads less than
	// the store holds.
	waiting atomic.Int64

	quit chan struct{}  // closed by Close to stop the committer and GC
	wg   sync.WaitGroup // the committer and GC goroutines

	// life is read-locked by every method for its whole call and
	// write-locked by Close, so Close waits for calls in progress and no
	// call touches a closed DB.
	life   sync.RWMutex
	closed bool // guarded by life

	// fileLocks serialise SaveFileVersion per file (read the last version,
	// write the next), striped by a hash of the file's key prefix.
	fileLocks [fileLockStripes]sync.Mutex

	// counters of the committer: batches taken, ops in them, transactions
	// committed, ops whose cache entries were split out
	stats struct {
		batches, ops, txns, splits, bytes atomic.Int64
	}

	// tasks looks up the outcomes of the tasks an intent names
	// (cachestore.TaskResolver); nil until SetTaskLookup.
	tasks atomic.Pointer[cachestore.TaskLookup]
}

var (
	_ cachestore.Store        = (*Store)(nil)
	_ cachestore.KVCreator    = (*Store)(nil)
	_ cachestore.TaskResolver = (*Store)(nil)
)

// Open opens (or creates) the store described by opts, resolves every
// intent record a crash left behind (RecoverAll) and starts the committer
// and the value-log GC goroutines. Close stops them. An intent that cannot
// be resolved (a corrupt record) is logged and does not fail the open:
// LoadSession of its session returns the error.
func Open(opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	where := opts.Dir
	if opts.InMemory {
		where = "memory"
	}
	if !opts.InMemory {
		if err := removeEmptyLogFiles(opts.Dir, opts.Logger); err != nil {
			return nil, fmt.Errorf("opening badger store in %s: %w", where, err)
		}
	}
	db, err := badgerdb.Open(opts.badgerOptions())
	if err != nil {
		return nil, fmt.Errorf("opening badger store in %s: %w", where, err)
	}
	b := &Store{
		db:   db,
		log:  opts.Logger.With().Str("component", "cachestore").Logger(),
		now:  time.Now,
		ops:  make(chan *writeOp, opsQueueLen),
		quit: make(chan struct{}),

		nextTurns: map[string]int64{},
	}
	if err := b.openWaitingIndex(context.Background()); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("opening badger store in %s: %w", where, err)
	}
	b.wg.Add(1)
	go b.commitLoop()
	n, err := b.recoverAll(context.Background())
	if err != nil {
		// One bad record must not keep every other session from loading:
		// the sessions concerned fail in LoadSession with the same error.
		b.log.Error().Err(err).Int("resolved", n).Msg("recovering interrupted turns")
	}
	if n > 0 {
		b.log.Info().Int("turns", n).Msg("resolved interrupted turns")
	}
	if every := opts.gcInterval(); every > 0 {
		b.wg.Add(1)
		go b.gcLoop(every)
	}
	return b, nil
}

// enter starts a call: ErrClosed once Close has begun. Every successful
// enter is paired with leave.
func (b *Store) enter() error {
	b.life.RLock()
	if b.closed {
		b.life.RUnlock()
		return cachestore.ErrClosed
	}
	return nil
}

func (b *Store) leave() { b.life.RUnlock() }

// Close waits for calls in progress, stops the committer and GC goroutines
// and closes the DB. It is idempotent; every other method returns ErrClosed
// afterwards.
func (b *Store) Close() error {
	b.life.Lock()
	defer b.life.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	close(b.quit)
	b.wg.Wait()
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("closing badger store: %w", err)
	}
	return nil
}

// gcLoop runs value-log GC every interval until Close.
func (b *Store) gcLoop(every time.Duration) {
	defer b.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.quit:
			return
		case <-t.C:
		}
		for rewrites := 0; ; rewrites++ {
			select {
			case <-b.quit:
				return
			default:
			}
			err := b.db.RunValueLogGC(gcDiscardRatio)
			if errors.Is(err, badgerdb.ErrNoRewrite) {
				b.log.Debug().Int("rewrites", rewrites).Msg("value-log GC done")
				break
			}
			if err != nil {
				b.log.Warn().Err(err).Msg("value-log GC")
				break
			}
		}
	}
}

// LoadSession returns the session's state, first resolving an intent record
// left by a crash into a committed turn.
func (b *Store) LoadSession(ctx context.Context, session string) (cachestore.SessionState, error) {
	if err := b.enter(); err != nil {
		return cachestore.SessionState{}, fmt.Errorf("loading session %q: %w", session, err)
	}
	defer b.leave()
	if err := ctx.Err(); err != nil {
		return cachestore.SessionState{}, fmt.Errorf("loading session %q: %w", session, err)
	}
	next, _, err := b.resolveSession(ctx, session, true)
	if err != nil {
		return cachestore.SessionState{}, err
	}
	if _, err := cachestore.SettleClaimed(ctx, entered{b}, session); err != nil {
		return cachestore.SessionState{}, fmt.Errorf("loading session %q: %w", session, err)
	}
	block, err := b.takeEventBlocks(ctx, session, next)
	if err != nil {
		return cachestore.SessionState{}, fmt.Errorf("loading session %q: %w", session, err)
	}
	return cachestore.SessionState{NextTurn: next, EventBlock: block}, nil
}

// iterCheckEvery is how many items a long iteration reads between checks
// of its context.
const iterCheckEvery = 256

// Turns returns the committed turns of a session in order (empty for an
// unknown session).
func (b *Store) Turns(ctx context.Context, session string) ([]*messages.TurnRecord, error) {
	if err := b.enter(); err != nil {
		return nil, fmt.Errorf("reading turns of session %q: %w", session, err)
	}
	defer b.leave()
	out := []*messages.TurnRecord{}
	err := b.db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: turnPrefix(session), PrefetchValues: true, PrefetchSize: 16})
		defer it.Close()
		n := 0
		for it.Rewind(); it.Valid(); it.Next() {
			if n++; n%iterCheckEvery == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			rec, err := readTurn(txn, it.Item())
			if err != nil {
				return err
			}
			out = append(out, rec)
		}
		return ctx.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("reading turns of session %q: %w", session, err)
	}
	return out, nil
}

func readTurn(txn *badgerdb.Txn, item *badgerdb.Item) (*messages.TurnRecord, error) {
	rec := &messages.TurnRecord{}
	var err error
	if item.UserMeta()&metaChunked != 0 {
		var v []byte
		if v, err = readValue(txn, item); err == nil {
			err = proto.Unmarshal(v, rec)
		}
	} else {
		err = item.Value(func(v []byte) error {
			// Unmarshal copies strings and bytes out of v.
			return proto.Unmarshal(v, rec)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("decoding turn record %q: %w", item.Key(), err)
	}
	return rec, nil
}

// TurnByID returns the committed turn with this turn id, or ErrNotFound.
func (b *Store) TurnByID(ctx context.Context, session, turnID string) (*messages.TurnRecord, error) {
	if err := b.enter(); err != nil {
		return nil, fmt.Errorf("reading turn %q of session %q: %w", turnID, session, err)
	}
	defer b.leave()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reading turn %q of session %q: %w", turnID, session, err)
	}
	var rec *messages.TurnRecord
	err := b.db.View(func(txn *badgerdb.Txn) error {
		if turnID == "" {
			return cachestore.ErrNotFound
		}
		item, err := txn.Get(turnIDKey(session, turnID))
		if errors.Is(err, badgerdb.ErrKeyNotFound) {
			return cachestore.ErrNotFound
		}
		if err != nil {
			return err
		}
		var turn int64
		if err := item.Value(func(v []byte) error {
			turn, err = decodeNumber(v)
			return err
		}); err != nil {
			return err
		}
		item, err = txn.Get(turnKey(session, turn))
		if errors.Is(err, badgerdb.ErrKeyNotFound) {
			return fmt.Errorf("turn %d named by the index: %w", turn, cachestore.ErrNotFound)
		}
		if err != nil {
			return err
		}
		rec, err = readTurn(txn, item)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading turn %q of session %q: %w", turnID, session, err)
	}
	return rec, nil
}

// Sessions lists the ids of sessions that have committed turns, sorted.
func (b *Store) Sessions(ctx context.Context) ([]string, error) {
	if err := b.enter(); err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	defer b.leave()
	out := []string{}
	err := b.db.View(func(txn *badgerdb.Txn) error {
		prefix := []byte(prefixSession)
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: prefix})
		defer it.Close()
		it.Rewind()
		for n := 1; it.Valid(); n++ {
			if n%iterCheckEvery == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			rest := it.Item().Key()[len(prefix):]
			i := bytes.IndexByte(rest, '/')
			if i < 0 {
				it.Next()
				continue
			}
			enc := bytes.Clone(rest[:i])
			if _, err := txn.Get(append(append(bytes.Clone(prefix), enc...), "/meta"...)); err == nil {
				s, err := unesc(enc)
				if err != nil {
					return err
				}
				out = append(out, s)
			} else if !errors.Is(err, badgerdb.ErrKeyNotFound) {
				return err
			}
			// Skip the rest of this session's keys: '0' follows '/'.
			it.Seek(append(append(bytes.Clone(prefix), enc...), '0'))
		}
		return ctx.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	return out, nil
}

// LoadRun returns a run's state: empty, never nil, maps for a new run.
func (b *Store) LoadRun(ctx context.Context, session, run string) (*cachestore.RunState, error) {
	if err := b.enter(); err != nil {
		return nil, fmt.Errorf("loading run %q of session %q: %w", run, session, err)
	}
	defer b.leave()
	rs := &cachestore.RunState{Dedup: map[string]*cachestore.DedupEntry{}, Fetched: map[string]bool{}}
	err := b.db.View(func(txn *badgerdb.Txn) error {
		prefix := runPrefix(session, run)
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 16})
		defer it.Close()
		n := 0
		for it.Rewind(); it.Valid(); it.Next() {
			if n++; n%iterCheckEvery == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			item := it.Item()
			rest := item.Key()[len(prefix):]
			switch {
			case bytes.HasPrefix(rest, []byte("f/")):
				tool, err := unesc(rest[2:])
				if err != nil {
					return err
				}
				rs.Fetched[tool] = true
			case bytes.HasPrefix(rest, []byte("d/")):
				var e *cachestore.DedupEntry
				if err := item.Value(func(v []byte) error {
					var err error
					e, err = cachestore.DecodeDedup(v)
					return err
				}); err != nil {
					return fmt.Errorf("key %q: %w", item.Key(), err)
				}
				key, err := unesc(rest[2:])
				if err != nil {
					return err
				}
				e.Key = key
				rs.Dedup[key] = e
			}
		}
		return ctx.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("loading run %q of session %q: %w", run, session, err)
	}
	return rs, nil
}

// EndRun deletes a run's state.
func (b *Store) EndRun(ctx context.Context, session, run string) error {
	if err := b.enter(); err != nil {
		return fmt.Errorf("ending run %q of session %q: %w", run, session, err)
	}
	defer b.leave()
	if err := b.deletePrefix(ctx, runPrefix(session, run)); err != nil {
		return fmt.Errorf("ending run %q of session %q: %w", run, session, err)
	}
	return nil
}

// deletePrefix deletes every key under prefix, in as many transactions as
// it takes.
func (b *Store) deletePrefix(ctx context.Context, prefix []byte) error {
	var keys [][]byte
	err := b.db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if err != nil || len(keys) == 0 {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	wb := b.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// removeEmptyLogFiles deletes memtable and value-log files of zero bytes.
// Badger creates such a file and then sizes it, and deletes one (a flushed
// memtable, a value-log file without entries or rewritten by GC) by
// truncating it to zero and then removing it; a process killed between the
// two steps leaves an empty file that Badger refuses to open ("while
// opening memtables … Create a new file", "During db.vlog.open err: Open
// existing file … Create a new file"). An empty file holds no entry: a
// new one has none yet, and a deleted one's were flushed or moved before
// it was emptied, so removing it loses nothing.
func removeEmptyLogFiles(dir string, log zerolog.Logger) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); e.IsDir() || ext != ".mem" && ext != ".vlog" {
			continue
		}
		fi, err := e.Info()
		if err != nil || fi.Size() != 0 {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
		log.Warn().Str("file", e.Name()).Msg("removed an empty log file left by a crash")
	}
	return nil
}
