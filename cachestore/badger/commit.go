package badger

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// Group commit.
//
// Every write goes through one committer goroutine. A caller encodes its
// writes (a writeOp) on its own goroutine and queues it; the committer takes
// whatever is queued (no waiting for more), checks each op's turn number
// individually against the session's next turn, writes the valid ops together
// in one Badger transaction — one fsync for all of them under SyncWrites —
// and answers each caller. Ops of one session stay in queue order, and since
// the committer is the only writer of session metadata, the check it makes
// cannot be invalidated by a concurrent transaction.

// maxBatchOps bounds how many queued ops one batch takes.
const maxBatchOps = 512

// opsQueueLen is the capacity of the committer's queue.
const opsQueueLen = 256

// States of a writeOp: a caller whose context ends while its op is still
// pending abandons it; once the committer has taken it, it completes.
const (
	opPending int32 = iota
	opTaken
	opAbandoned
)

// CommitStats are the group committer's counters since the store opened:
// batches taken from the queue, ops (intents, commits and other writes) in
// them, transactions committed, and ops whose cache entries were split out
// of their transaction. Ops/Batches is how many writes shared a batch.
type CommitStats struct {
	Batches, Ops, Txns, Splits int64
	// Bytes is the size of the keys and values the ops wrote.
	Bytes int64
}

// CommitStats returns the group committer's counters.
func (b *Store) CommitStats() CommitStats {
	return CommitStats{Batches: b.stats.batches.Load(), Ops: b.stats.ops.Load(), Txns: b.stats.txns.Load(),
		Splits: b.stats.splits.Load(), Bytes: b.stats.bytes.Load()}
}

// kv is one prepared write.
type kv struct {
	key, value []byte
	expiresAt  uint64 // Badger TTL, unix seconds; 0 for none
	del        bool
	// chunked: the key holds a record that may be stored in parts (turn
	// and intent records, see chunk.go).
	chunked bool
	// class says where the write may go when its op does not fit in one
	// transaction (see writeSplit).
	class writeClass
}

// writeClass places a write of an op too big for one transaction.
type writeClass uint8

const (
	// classAtomic writes go in the op's one transaction.
	classAtomic writeClass = iota
	// classBefore writes may go in earlier transactions: losing them to a
	// crash between the two only loses de-duplication entries.
	classBefore
	// classAfter writes may go in later transactions: the turn is
	// committed without them, and losing them to a crash only loses
	// de-duplication entries or fetched-schema marks.
	classAfter
)

func (w kv) apply(txn *badgerdb.Txn) error {
	switch {
	case w.del && w.chunked:
		return deleteChunked(txn, w.key)
	case w.del:
		return txn.Delete(w.key)
	case w.chunked:
		return setChunked(txn, w.key, w.value, w.expiresAt)
	}
	e := badgerdb.NewEntry(w.key, w.value)
	e.ExpiresAt = w.expiresAt
	return txn.SetEntry(e)
}

// applyBatch adds a write that is not chunked to a write batch.
func (w kv) applyBatch(wb *badgerdb.WriteBatch) error {
	if w.del {
		return wb.Delete(w.key)
	}
	e := badgerdb.NewEntry(w.key, w.value)
	e.ExpiresAt = w.expiresAt
	return wb.SetEntry(e)
}

// writeOp is one caller's unit of writes.
type writeOp struct {
	ctx     context.Context
	session string
	// check: turn must be the session's next turn; bump: the op commits that
	// turn (the meta write is in main), so the next op of the session in the
	// same batch is checked against turn+1.
	check, bump bool
	turn        int64
	// waitAdd approvals the op adds to the index of what waits, refused
	// (a *WaitingCapError) when they would take it past waitCap (if set).
	waitAdd, waitCap int64
	// main is written atomically, cache may go in later transactions when
	// the whole does not fit in one.
	main, cache []kv

	state atomic.Int32
	done  chan error
}

func (op *writeOp) apply(txn *badgerdb.Txn, withCache bool) error {
	for _, w := range op.main {
		if err := w.apply(txn); err != nil {
			return err
		}
	}
	if withCache {
		for _, w := range op.cache {
			if err := w.apply(txn); err != nil {
				return err
			}
		}
	}
	return nil
}

// submit queues op and waits for its answer. If ctx ends before the
// committer takes the op, the op is not applied and ctx's error returned;
// once taken, it completes. The caller holds the life lock.
func (b *Store) submit(ctx context.Context, op *writeOp) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	op.ctx = ctx
	op.done = make(chan error, 1)
	select {
	case b.ops <- op:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-op.done:
		return err
	case <-ctx.Done():
		if op.state.CompareAndSwap(opPending, opAbandoned) {
			return ctx.Err()
		}
		return <-op.done
	}
}

// commitLoop is the committer goroutine; Close stops it.
func (b *Store) commitLoop() {
	defer b.wg.Done()
	batch := make([]*writeOp, 0, maxBatchOps)
	for {
		select {
		case <-b.quit:
			return
		case op := <-b.ops:
			batch = append(batch[:0], op)
		}
	drain:
		for len(batch) < maxBatchOps {
			select {
			case op := <-b.ops:
				batch = append(batch, op)
			default:
				break drain
			}
		}
		b.processBatch(batch)
		clear(batch)
	}
}

// processBatch takes, validates and writes one batch of ops.
func (b *Store) processBatch(batch []*writeOp) {
	taken := make([]*writeOp, 0, len(batch))
	for _, op := range batch {
		if !op.state.CompareAndSwap(opPending, opTaken) {
			continue
		}
		if err := op.ctx.Err(); err != nil {
			op.done <- err
			continue
		}
		taken = append(taken, op)
	}
	if len(taken) == 0 {
		return
	}
	b.stats.batches.Add(1)
	b.stats.ops.Add(int64(len(taken)))
	var n int
	for _, op := range taken {
		for _, w := range op.main {
			n += len(w.key) + len(w.value)
		}
		for _, w := range op.cache {
			n += len(w.key) + len(w.value)
		}
	}
	b.stats.bytes.Add(int64(n))
	b.writeOps(b.validate(taken))
}

// validate answers the ops whose turn is not their session's next turn
// with ErrStaleTurn and returns the others, in order. A session's next turn
// comes from the committer's copy (nextTurns) or, on a miss, from its meta
// key.
func (b *Store) validate(ops []*writeOp) []*writeOp {
	valid := make([]*writeOp, 0, len(ops))
	var next map[string]int64
	var reserved int64 // approvals added by the ops already taken
	var txn *badgerdb.Txn
	defer func() {
		if txn != nil {
			txn.Discard()
		}
	}()
	for _, op := range ops {
		if !op.check {
			valid = append(valid, op)
			continue
		}
		n, ok := next[op.session]
		if !ok {
			if n, ok = b.nextTurns[op.session]; !ok {
				if txn == nil {
					txn = b.db.NewTransaction(false)
				}
				var err error
				if n, err = readNextTurn(txn, op.session); err != nil {
					op.done <- err
					continue
				}
			}
		}
		if next == nil {
			next = make(map[string]int64, len(ops))
		}
		if op.turn != n {
			next[op.session] = n
			op.done <- fmt.Errorf("next turn is %d: %w", n, cachestore.ErrStaleTurn)
			continue
		}
		if op.waitAdd > 0 && op.waitCap > 0 {
			if have := b.waiting.Load() + reserved; have+op.waitAdd > op.waitCap {
				next[op.session] = n
				op.done <- &cachestore.WaitingCapError{Cap: op.waitCap, Waiting: have}
				continue
			}
		}
		reserved += op.waitAdd
		if op.bump {
			n++
		}
		next[op.session] = n
		valid = append(valid, op)
	}
	return valid
}

// maxNextTurns bounds the committer's copy of next turn numbers; it is
// emptied when full (entries are read again from the store on a miss).
const maxNextTurns = 1 << 16

// written answers an op whose writes are committed and, for an op that
// committed a turn, records the session's next turn.
func (b *Store) written(op *writeOp) {
	if op.bump {
		if len(b.nextTurns) >= maxNextTurns {
			clear(b.nextTurns)
		}
		b.nextTurns[op.session] = op.turn + 1
	}
	b.waiting.Add(op.waitAdd)
	op.done <- nil
}

// errEarlierFailed answers an op queued behind a failed op of its session
// in the same batch: it was validated against a turn that was not written.
var errEarlierFailed = errors.New("an earlier write of the session in the same batch failed")

// writeOps writes valid ops in as few transactions as fit, in order, and
// answers each op once its transaction is durable.
func (b *Store) writeOps(ops []*writeOp) {
	// failed holds the sessions whose turn-committing op failed: a later
	// op of such a session was validated against a turn that was not written.
	failed := make(map[string]bool)
	fail := func(op *writeOp, err error) {
		if op.bump {
			failed[op.session] = true
		}
		// What was written of the session is not known for sure: read its
		// next turn from the store next time.
		delete(b.nextTurns, op.session)
		op.done <- tooLarge(err)
	}
	var txn *badgerdb.Txn
	var group []*writeOp

	// rebuild starts a fresh transaction holding the ops of group (used
	// when the current one received part of an op that did not fit).
	rebuild := func() {
		if txn != nil {
			txn.Discard()
		}
		txn = b.db.NewTransaction(true)
		for _, op := range group {
			if err := op.apply(txn, true); err != nil {
				// These ops fitted before; should they not now, fail them.
				txn.Discard()
				txn = nil
				for _, o := range group {
					fail(o, err)
				}
				group = group[:0]
				return
			}
		}
	}
	flush := func() {
		if txn == nil {
			return
		}
		var err error
		if len(group) > 0 {
			err = txn.Commit()
			b.stats.txns.Add(1)
		}
		txn.Discard()
		txn = nil
		for _, op := range group {
			if err != nil {
				fail(op, err)
			} else {
				b.written(op)
			}
		}
		group = group[:0]
	}

	for _, op := range ops {
		if op.check && failed[op.session] {
			op.done <- errEarlierFailed
			continue
		}
		if txn == nil {
			txn = b.db.NewTransaction(true)
		}
		err := op.apply(txn, true)
		if err == nil {
			group = append(group, op)
			continue
		}
		if !errors.Is(err, badgerdb.ErrTxnTooBig) {
			rebuild()
			fail(op, err)
			continue
		}
		if len(group) > 0 {
			// Commit what fit, then try the op in a transaction of its own.
			rebuild()
			flush()
			txn = b.db.NewTransaction(true)
			if err = op.apply(txn, true); err == nil {
				group = append(group, op)
				continue
			}
		}
		txn.Discard()
		txn = nil
		if errors.Is(err, badgerdb.ErrTxnTooBig) {
			err = b.writeSplit(op)
		}
		if err != nil {
			fail(op, err)
		} else {
			b.written(op)
		}
	}
	flush()
}

// writeSplit writes an op too big for one transaction: its classBefore
// writes (de-duplication entries a mutation made stale) first, then its
// classAtomic writes in one transaction — the turn record, the session's
// next turn, the turn-id index and the deletion of the intent: this is the
// commit, and until it is written the turn is not there — then its
// classAfter writes (new de-duplication entries, fetched schemas) and its
// cache entries. A crash before the commit leaves the intent, resolved as
// for any interrupted turn; a crash after it loses at most de-duplication
// entries and fetched marks, which only makes a later identical call run
// again. A failure after the commit is logged, not returned: the turn is
// committed.
func (b *Store) writeSplit(op *writeOp) error {
	var before, inTxn, after []kv
	deleted := make(map[string]bool)
	for _, w := range op.main {
		switch w.class {
		case classBefore:
			before = append(before, w)
			if w.del {
				deleted[string(w.key)] = true
			}
		case classAfter:
			after = append(after, w)
		case classAtomic:
			inTxn = append(inTxn, w)
		default:
			return fmt.Errorf("writing a split commit: write of unknown class %d", w.class)
		}
	}
	if len(before) > 0 {
		if err := b.writeBatch(before); err != nil {
			return err
		}
	}
	txn := b.db.NewTransaction(true)
	defer txn.Discard()
	for _, w := range inTxn {
		if err := w.apply(txn); err != nil {
			return err
		}
	}
	b.stats.txns.Add(1)
	if err := txn.Commit(); err != nil {
		return err
	}
	b.stats.splits.Add(1)
	// A key in both DedupPut and DedupDel ends deleted.
	rest := make([]kv, 0, len(after)+len(op.cache))
	for _, w := range after {
		if !deleted[string(w.key)] {
			rest = append(rest, w)
		}
	}
	rest = append(rest, op.cache...)
	if err := b.writeBatch(rest); err != nil {
		b.log.Error().Err(tooLarge(err)).Str("session", op.session).
			Msg("writing the run state and cache entries of a committed turn")
	}
	return nil
}

// writeBatch writes ws through a write batch: in as many transactions as
// it takes, not atomically.
func (b *Store) writeBatch(ws []kv) error {
	if len(ws) == 0 {
		return nil
	}
	wb := b.db.NewWriteBatch()
	defer wb.Cancel()
	for _, w := range ws {
		if err := w.applyBatch(wb); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// readNextTurn reads a session's next turn number (1 for a new session).
func readNextTurn(txn *badgerdb.Txn, session string) (int64, error) {
	item, err := txn.Get(metaKey(session))
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return 1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading meta of session %q: %w", session, err)
	}
	var n int64
	err = item.Value(func(v []byte) error {
		var err error
		n, err = decodeNumber(v)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reading meta of session %q: %w", session, err)
	}
	if n < 1 {
		return 0, fmt.Errorf("meta of session %q: next turn %d: %w", session, n, cachestore.ErrCorrupt)
	}
	return n, nil
}

// turnOp prepares the writes of committing rec as the session's next turn:
// the record, its turn-id index, the meta bump and the deletion of the
// turn's intent record.
func (b *Store) turnOp(session string, rec *messages.TurnRecord) (*writeOp, error) {
	raw, replaced, err := cachestore.MarshalValid(rec)
	if err != nil {
		return nil, fmt.Errorf("encoding turn record: %w", err)
	}
	if replaced {
		b.log.Warn().Str("session", session).Int64("turn", rec.Turn).
			Msg("turn record held invalid UTF-8; stored with U+FFFD in its place")
	}
	op := &writeOp{session: session, check: true, bump: true, turn: rec.Turn}
	op.main = append(op.main,
		kv{key: turnKey(session, rec.Turn), value: raw, chunked: true},
		kv{key: metaKey(session), value: encodeNumber(rec.Turn + 1)},
		kv{key: intentKey(session, rec.Turn), del: true, chunked: true},
	)
	if rec.TurnId != "" {
		op.main = append(op.main, kv{key: turnIDKey(session, rec.TurnId), value: encodeNumber(rec.Turn)})
	}
	return op, nil
}

// CommitTurn writes the turn record, its turn-id index, the run-state
// changes and the cache entries, bumps the session's next turn and deletes
// the turn's intent record, atomically (cache entries go in a later
// transaction only when the whole does not fit in one). Run-state changes
// apply in field order, so a key in both DedupPut and DedupDel ends deleted.
// It returns once the write is durable; commits of concurrent sessions
// share one transaction.
func (b *Store) CommitTurn(ctx context.Context, c *cachestore.TurnCommit) error {
	if c == nil || c.Record == nil {
		return errors.New("committing turn: no turn record")
	}
	if err := b.enter(); err != nil {
		return fmt.Errorf("committing turn %d of session %q: %w", c.Record.Turn, c.Session, err)
	}
	defer b.leave()
	if err := b.commitTurn(ctx, c); err != nil {
		return fmt.Errorf("committing turn %d of session %q: %w", c.Record.Turn, c.Session, err)
	}
	return nil
}

func (b *Store) commitTurn(ctx context.Context, c *cachestore.TurnCommit) error {
	if err := cachestore.CheckApprovals(c); err != nil {
		return err
	}
	op, err := b.turnOp(c.Session, c.Record)
	if err != nil {
		return err
	}
	if len(c.Approvals) > 0 {
		if op.waitAdd, err = b.waitingWrites(c, op); err != nil {
			return err
		}
		op.waitCap = c.MaxWaiting
	}
	run := c.Record.Run
	for _, tool := range c.FetchedAdd {
		op.main = append(op.main, kv{key: fetchedKey(c.Session, run, tool), value: []byte{}, class: classAfter})
	}
	for _, e := range c.DedupPut {
		if e == nil {
			continue
		}
		op.main = append(op.main, kv{key: dedupKey(c.Session, run, e.Key), value: cachestore.EncodeDedup(e), class: classAfter})
	}
	for _, k := range c.DedupDel {
		op.main = append(op.main, kv{key: dedupKey(c.Session, run, k), del: true, class: classBefore})
	}
	for _, e := range c.CachePut {
		op.cache = append(op.cache, cacheKV(e))
	}
	op.main = appendEventBlock(op.main, c.Session, c.EventBlock)
	return b.submit(ctx, op)
}

// appendEventBlock adds the write of a session's event counter, when set.
func appendEventBlock(ws []kv, session string, block uint64) []kv {
	if block == 0 {
		return ws
	}
	return append(ws, kv{key: eventsKey(session), value: encodeNumber(int64(block))})
}

// readEventBlock reads a session's event counter; ok is false for a
// session stored without one.
func readEventBlock(txn *badgerdb.Txn, session string) (block uint64, ok bool, err error) {
	item, err := txn.Get(eventsKey(session))
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the event counter of session %q: %w", session, err)
	}
	var n int64
	err = item.Value(func(v []byte) error {
		var err error
		n, err = decodeNumber(v)
		return err
	})
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("the event counter of session %q: %w", session, errors.Join(err, cachestore.ErrCorrupt))
	}
	return uint64(n), true, nil
}

// takeEventBlocks reads the session's event counter and stores it moved
// past the blocks a loader takes (cachestore.EventBlocksPerLoad).
func (b *Store) takeEventBlocks(ctx context.Context, session string, next int64) (uint64, error) {
	var stored uint64
	var ok bool
	err := b.db.View(func(txn *badgerdb.Txn) error {
		var err error
		stored, ok, err = readEventBlock(txn, session)
		return err
	})
	if err != nil {
		return 0, err
	}
	block := cachestore.LoadedEventBlock(stored, ok, next)
	op := &writeOp{session: session, main: appendEventBlock(nil, session, block+cachestore.EventBlocksPerLoad)}
	if err := b.submit(ctx, op); err != nil {
		return 0, fmt.Errorf("storing the event counter of session %q: %w", session, err)
	}
	return block, nil
}

// WriteIntent persists (or replaces) the intent record of the session's
// next turn; ErrStaleTurn if in.Turn is not that turn. It returns once the
// record is durable.
func (b *Store) WriteIntent(ctx context.Context, in *cachestore.Intent) error {
	if in == nil {
		return errors.New("writing intent: no intent")
	}
	if err := b.enter(); err != nil {
		return fmt.Errorf("writing intent of turn %d of session %q: %w", in.Turn, in.Session, err)
	}
	defer b.leave()
	raw, err := cachestore.EncodeIntent(in)
	if err != nil {
		return fmt.Errorf("writing intent of turn %d of session %q: %w", in.Turn, in.Session, err)
	}
	op := &writeOp{session: in.Session, check: true, turn: in.Turn,
		main: appendEventBlock([]kv{{key: intentKey(in.Session, in.Turn), value: raw, chunked: true}}, in.Session, in.EventBlock)}
	if err := b.submit(ctx, op); err != nil {
		return fmt.Errorf("writing intent of turn %d of session %q: %w", in.Turn, in.Session, err)
	}
	return nil
}
