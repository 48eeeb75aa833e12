package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	badgerdb "github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/internal/wire"
	"github.com/tooldispatch/tooldispatch/messages"
)

// The index of what waits (cachestore.WaitingIndex): beside each approval
// v1/a/{session}/{call}, the entry v1/w/{asked}/{session}/{call} (what a
// listing shows, in the order listings read) and the key
// v1/ws/{session}/{asked}/{call} (a session's entries, in the same order),
// written, rewritten and deleted in the approval's own transactions. The
// committer keeps the number of entries (Store.waiting), which only it
// raises, for the cap of TurnCommit.MaxWaiting. v1/wi marks a store whose
// index is built: a store written before the index existed gets it at
// open (openWaitingIndex).

// Waiting entry: 1 run, 2 tool, 3 claimed, 4 the entry
// (cachestore.EncodeWaiting). A listing's filters read the first three
// without decoding the entry.
func encodeWaitingValue(w *cachestore.Waiting) []byte {
	entry := cachestore.EncodeWaiting(w)
	b := make([]byte, 0, len(entry)+len(w.Run)+len(w.Tool)+16)
	b = wire.AppendString(b, 1, w.Run)
	b = wire.AppendString(b, 2, w.Tool)
	if w.Claimed {
		b = wire.AppendVarint(b, 3, 1)
	}
	return wire.AppendBytes(b, 4, entry)
}

// waitingHead reads the run, tool and claim of a waiting entry, and the
// entry's bytes (pointing into v).
func waitingHead(v []byte) (run, tool []byte, claimed bool, entry []byte, err error) {
	err = wire.Decode(v, func(f wire.Field) error {
		switch {
		case f.Num == 1 && f.Type == protowire.BytesType:
			run = f.Bytes
		case f.Num == 2 && f.Type == protowire.BytesType:
			tool = f.Bytes
		case f.Num == 3 && f.Type == protowire.VarintType:
			claimed = f.Varint != 0
		case f.Num == 4 && f.Type == protowire.BytesType:
			entry = f.Bytes
		}
		return nil
	})
	return run, tool, claimed, entry, err
}

// waitingWrites adds to op the writes of c's approvals and their index
// entries, and returns how many approvals are new to the store: one whose
// call already has an approval replaces it (its entries are deleted).
// The session's single writer makes the commit, so the approvals read
// here do not change before it is written.
func (b *Store) waitingWrites(c *cachestore.TurnCommit, op *writeOp) (int64, error) {
	var adds int64
	seen := make(map[string]bool, len(c.Approvals))
	err := b.db.View(func(txn *badgerdb.Txn) error {
		for _, a := range c.Approvals {
			key := approvalKey(a.Session, a.CallID)
			if old, err := getApproval(txn, key); err != nil {
				return err
			} else if old != nil {
				op.main = append(op.main, waitingDeletes(cachestore.WaitingOf(old, "").Pos())...)
			} else if !seen[string(key)] {
				adds++
			}
			seen[string(key)] = true
			w := cachestore.WaitingOf(a, c.Record.GetTurnId())
			op.main = append(op.main, kv{key: key, value: cachestore.EncodeApproval(a)},
				kv{key: waitingKey(w.Pos()), value: encodeWaitingValue(w)},
				kv{key: waitingSessionKey(w.Pos()), value: []byte{}})
		}
		return nil
	})
	return adds, err
}

// getApproval reads a stored approval; nil when there is none.
func getApproval(txn *badgerdb.Txn, key []byte) (*cachestore.Approval, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return nil, err
	}
	return cachestore.DecodeApproval(v)
}

// waitingDeletes are the deletions of the index entries at pos.
func waitingDeletes(pos cachestore.WaitingPos) []kv {
	return []kv{{key: waitingKey(pos), del: true}, {key: waitingSessionKey(pos), del: true}}
}

// claimWaiting marks the index entry of a claimed approval claimed.
func claimWaiting(txn *badgerdb.Txn, a *cachestore.Approval) error {
	key := waitingKey(cachestore.WaitingOf(a, "").Pos())
	item, err := txn.Get(key)
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return err
	}
	_, _, _, entry, err := waitingHead(v)
	if err != nil {
		return err
	}
	w, err := cachestore.DecodeWaiting(entry)
	if err != nil {
		return err
	}
	w.Claimed = true
	return txn.Set(key, encodeWaitingValue(w))
}

// settleWaiting deletes the approval of a call and its index entries, and
// reports whether there was one.
func settleWaiting(txn *badgerdb.Txn, session, callID string) (bool, error) {
	key := approvalKey(session, callID)
	a, err := getApproval(txn, key)
	if err != nil || a == nil {
		return false, err
	}
	for _, w := range append(waitingDeletes(cachestore.WaitingOf(a, "").Pos()), kv{key: key, del: true}) {
		if err := txn.Delete(w.key); err != nil {
			return false, err
		}
	}
	return true, nil
}

// ListWaiting implements cachestore.WaitingIndex.
func (b *Store) ListWaiting(ctx context.Context, q cachestore.WaitingQuery) (cachestore.WaitingPage, error) {
	if err := b.enter(); err != nil {
		return cachestore.WaitingPage{}, fmt.Errorf("listing what waits: %w", err)
	}
	defer b.leave()
	p := cachestore.NewWaitingPager(q)
	err := b.db.View(func(txn *badgerdb.Txn) error {
		if q.Session != "" {
			return listSessionWaiting(ctx, txn, p)
		}
		return listWaiting(ctx, txn, p)
	})
	if err != nil {
		return cachestore.WaitingPage{}, fmt.Errorf("listing what waits: %w", err)
	}
	return p.Page(), nil
}

// listWaiting reads the index from the query's place on.
func listWaiting(ctx context.Context, txn *badgerdb.Txn, p *cachestore.WaitingPager) error {
	q := p.Query()
	it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte(prefixWaiting)})
	defer it.Close()
	if q.After != nil {
		it.Seek(waitingKey(*q.After))
	} else {
		it.Rewind()
	}
	for n := 1; it.Valid(); it.Next() {
		if n++; n%iterCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		item := it.Item()
		pos, err := parseWaitingKey(item.Key())
		if err != nil {
			return err
		}
		if q.After != nil && pos.Compare(*q.After) <= 0 {
			continue
		}
		if !q.InTime(pos.Asked) {
			return nil
		}
		more, err := p.Offer(pos, func() (*cachestore.Waiting, error) { return readWaiting(item, q) })
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// listSessionWaiting reads one session's entries from the query's place on.
func listSessionWaiting(ctx context.Context, txn *badgerdb.Txn, p *cachestore.WaitingPager) error {
	q := p.Query()
	prefix := waitingSessionPrefix(q.Session)
	it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: prefix})
	defer it.Close()
	if q.After != nil {
		it.Seek(appendNanos(bytes.Clone(prefix), q.After.Asked))
	} else {
		it.Rewind()
	}
	for n := 1; it.Valid(); it.Next() {
		if n++; n%iterCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		pos, err := parseWaitingSessionKey(q.Session, it.Item().Key()[len(prefix):])
		if err != nil {
			return err
		}
		if q.After != nil && pos.Compare(*q.After) <= 0 {
			continue
		}
		if !q.InTime(pos.Asked) {
			return nil
		}
		more, err := p.Offer(pos, func() (*cachestore.Waiting, error) {
			if q.CallID != "" && pos.CallID != q.CallID {
				return nil, nil
			}
			item, err := txn.Get(waitingKey(pos))
			if errors.Is(err, badgerdb.ErrKeyNotFound) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return readWaiting(item, q)
		})
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// readWaiting decodes an index entry that passes the query's run, tool and
// call filters and is not claimed; nil for one that does not.
func readWaiting(item *badgerdb.Item, q *cachestore.WaitingQuery) (*cachestore.Waiting, error) {
	var w *cachestore.Waiting
	err := item.Value(func(v []byte) error {
		run, tool, claimed, entry, err := waitingHead(v)
		if err != nil {
			return err
		}
		if claimed || (q.Run != "" && string(run) != q.Run) || (q.Tool != "" && string(tool) != q.Tool) {
			return nil
		}
		w, err = cachestore.DecodeWaiting(entry)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", item.Key(), err)
	}
	return w, nil
}

// TurnByNumber returns one committed turn, or cachestore.ErrNotFound.
func (b *Store) TurnByNumber(ctx context.Context, session string, turn int64) (*messages.TurnRecord, error) {
	if err := b.enter(); err != nil {
		return nil, fmt.Errorf("reading turn %d of session %q: %w", turn, session, err)
	}
	defer b.leave()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reading turn %d of session %q: %w", turn, session, err)
	}
	var rec *messages.TurnRecord
	err := b.db.View(func(txn *badgerdb.Txn) error {
		item, err := txn.Get(turnKey(session, turn))
		if errors.Is(err, badgerdb.ErrKeyNotFound) {
			return cachestore.ErrNotFound
		}
		if err != nil {
			return err
		}
		rec, err = readTurn(txn, item)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading turn %d of session %q: %w", turn, session, err)
	}
	return rec, nil
}

// openWaitingIndex builds the index of what waits when the store has none
// (written before it existed) or when it does not hold one entry per
// approval (a program that did not know the index wrote the store since),
// and counts its entries. It runs at open, before any other write.
func (b *Store) openWaitingIndex(ctx context.Context) error {
	var approvals, entries int64
	var built bool
	err := b.db.View(func(txn *badgerdb.Txn) error {
		approvals, entries = countKeys(txn, prefixApproval), countKeys(txn, prefixWaiting)
		_, err := txn.Get([]byte(keyWaitingBuilt))
		if errors.Is(err, badgerdb.ErrKeyNotFound) {
			return nil
		}
		built = err == nil
		return err
	})
	if err != nil {
		return fmt.Errorf("reading the index of what waits: %w", err)
	}
	if built && approvals == entries {
		b.waiting.Store(entries)
		return nil
	}
	n, err := b.buildWaitingIndex(ctx)
	if err != nil {
		return fmt.Errorf("building the index of what waits: %w", err)
	}
	b.waiting.Store(n)
	if approvals > 0 || entries > 0 {
		b.log.Info().Int64("approvals", n).Int64("entries_before", entries).Msg("built the index of what waits")
	}
	return nil
}

// countKeys counts the keys under prefix.
func countKeys(txn *badgerdb.Txn, prefix string) int64 {
	it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte(prefix)})
	defer it.Close()
	var n int64
	for it.Rewind(); it.Valid(); it.Next() {
		n++
	}
	return n
}

// buildWaitingIndex writes the index entries of every approval (their
// turn's id read from the turn), after deleting any there were, then the
// mark that the index is built; it returns how many it wrote. An approval
// that does not decode is logged and left out.
func (b *Store) buildWaitingIndex(ctx context.Context) (int64, error) {
	for _, prefix := range []string{prefixWaiting, prefixWaitingSession} {
		if err := b.deletePrefix(ctx, []byte(prefix)); err != nil {
			return 0, err
		}
	}
	wb := b.db.NewWriteBatch()
	defer wb.Cancel()
	var n int64
	turnIDs := map[string]string{}
	err := b.db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte(prefixApproval), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			a, err := cachestore.DecodeApproval(v)
			if err != nil {
				b.log.Error().Err(err).Str("key", string(it.Item().Key())).Msg("an approval that does not decode is left out of the index")
				continue
			}
			tk := string(turnKey(a.Session, a.Turn))
			id, ok := turnIDs[tk]
			if !ok {
				if item, err := txn.Get([]byte(tk)); err == nil {
					if rec, err := readTurn(txn, item); err == nil {
						id = rec.GetTurnId()
					}
				}
				turnIDs[tk] = id
			}
			w := cachestore.WaitingOf(a, id)
			if err := wb.Set(waitingKey(w.Pos()), encodeWaitingValue(w)); err != nil {
				return err
			}
			if err := wb.Set(waitingSessionKey(w.Pos()), []byte{}); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err == nil {
		err = wb.Set([]byte(keyWaitingBuilt), encodeNumber(1))
	}
	if err == nil {
		err = wb.Flush()
	}
	return n, err
}
