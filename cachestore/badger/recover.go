package badger

import (
	"context"
	"errors"
	"fmt"
	"slices"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/tooldispatch/tooldispatch/cachestore"
)

// resolveSession turns the session's pending intent, if any, into a
// committed turn and returns the session's next turn number afterwards and
// whether an intent was resolved. Intents for any other turn than the next
// one (left over from a turn that was committed after all) are deleted.
// An intent naming a started call's task is resolved with what the
// TaskLookup learns, asked outside any transaction; without a lookup it
// is left in place unless blind.
func (b *Store) resolveSession(ctx context.Context, session string, blind bool) (next int64, resolved bool, err error) {
	type stored struct {
		key []byte
		in  *cachestore.Intent
	}
	var intents []stored
	err = b.db.View(func(txn *badgerdb.Txn) error {
		var err error
		if next, err = readNextTurn(txn, session); err != nil {
			return err
		}
		prefix := intentPrefix(session)
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 4})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			raw, err := readValue(txn, item)
			if err != nil {
				return fmt.Errorf("reading intent %q: %w", item.Key(), err)
			}
			in, err := cachestore.DecodeIntent(raw)
			if err != nil {
				return fmt.Errorf("intent %q: %w", item.Key(), err)
			}
			intents = append(intents, stored{key: item.KeyCopy(nil), in: in})
		}
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("loading session %q: %w", session, err)
	}
	if len(intents) == 0 {
		return next, false, nil
	}

	var current *cachestore.Intent
	dels := make([]kv, 0, len(intents))
	for _, s := range intents {
		dels = append(dels, kv{key: s.key, del: true, chunked: true})
		if s.in.Turn == next && current == nil {
			current = s.in
		} else {
			b.log.Warn().Str("session", session).Int64("intent_turn", s.in.Turn).Int64("next_turn", next).
				Msg("dropping an intent record of a turn that is not the session's next")
		}
	}
	if current == nil {
		if err := b.submit(ctx, &writeOp{session: session, main: dels}); err != nil {
			return 0, false, fmt.Errorf("deleting stale intents of session %q: %w", session, err)
		}
		return next, false, nil
	}

	var looked *cachestore.TaskOutcomes
	if len(cachestore.StartedTasks(current)) > 0 {
		lookup := b.tasks.Load()
		if lookup == nil && !blind {
			return next, false, nil // left for the lookup
		}
		if lookup != nil {
			looked = cachestore.LookUpTasks(ctx, *lookup, session, current)
		}
	}
	current.Session = session
	rec := cachestore.ResolveIntentWith(current, b.now(), looked)
	op, err := b.turnOp(session, rec)
	if err != nil {
		return 0, false, fmt.Errorf("resolving intent of turn %d of session %q: %w", next, session, err)
	}
	op.main = append(op.main, dels...)
	if err := b.submit(ctx, op); err != nil {
		return 0, false, fmt.Errorf("resolving intent of turn %d of session %q: %w", next, session, err)
	}
	b.log.Info().Str("session", session).Int64("turn", next).Int("calls", len(rec.ToolMessages)).
		Msg("resolved the intent record of an interrupted turn")
	return next + 1, true, nil
}

// RecoverAll resolves every intent record in the store and returns how many
// turns it resolved. Open runs it before returning.
func (b *Store) RecoverAll(ctx context.Context) (int, error) {
	if err := b.enter(); err != nil {
		return 0, fmt.Errorf("recovering intents: %w", err)
	}
	defer b.leave()
	return b.recoverAll(ctx)
}

func (b *Store) recoverAll(ctx context.Context) (int, error) {
	var sessions []string
	err := b.db.View(func(txn *badgerdb.Txn) error {
		prefix := []byte(prefixIntent)
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			rest := it.Item().Key()[len(prefix):]
			i := slices.Index(rest, '/')
			if i < 0 {
				continue
			}
			s, err := unesc(rest[:i])
			if err != nil {
				return err
			}
			if len(sessions) == 0 || sessions[len(sessions)-1] != s {
				sessions = append(sessions, s)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("listing intents: %w", err)
	}
	n, err := cachestore.RecoverSessions(ctx, sessions, func(ctx context.Context, session string) (bool, error) {
		_, resolved, err := b.resolveSession(ctx, session, false)
		return resolved, err
	})
	if _, cerr := cachestore.SettleClaimed(ctx, entered{b}, ""); cerr != nil {
		err = errors.Join(err, fmt.Errorf("recovering approvals: %w", cerr))
	}
	return n, err
}

// SetTaskLookup implements cachestore.TaskResolver.
func (b *Store) SetTaskLookup(l cachestore.TaskLookup) {
	if l == nil {
		b.tasks.Store(nil)
		return
	}
	b.tasks.Store(&l)
}
