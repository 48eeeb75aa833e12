package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	badgerdb "github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

const prefixKV = keyVersion + "kv/"

func kvKey(ns, key string) []byte {
	return join([]byte(prefixKV), esc(ns), []byte("/"), esc(key))
}

func kvPrefix(ns, keyPrefix string) []byte {
	return join([]byte(prefixKV), esc(ns), []byte("/"), esc(keyPrefix))
}

// KVGet returns one record of a namespace (secrets, error memory…), or ErrNotFound.
func (b *Store) KVGet(ctx context.Context, ns, key string) ([]byte, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	var out []byte
	err := b.db.View(func(txn *badgerdb.Txn) error {
		it, err := txn.Get(kvKey(ns, key))
		if errors.Is(err, badgerdb.ErrKeyNotFound) {
			return cachestore.ErrNotFound
		}
		if err != nil {
			return err
		}
		out, err = it.ValueCopy(nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", ns, key, err)
	}
	return out, nil
}

// KVPut stores one record of a namespace.
func (b *Store) KVPut(ctx context.Context, ns, key string, value []byte) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	if err := b.db.Update(func(txn *badgerdb.Txn) error { return txn.Set(kvKey(ns, key), value) }); err != nil {
		return fmt.Errorf("writing %s/%s: %w", ns, key, tooLarge(err))
	}
	return nil
}

// KVDelete deletes one record of a namespace; deleting a missing key is not an error.
func (b *Store) KVDelete(ctx context.Context, ns, key string) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	if err := b.db.Update(func(txn *badgerdb.Txn) error { return txn.Delete(kvKey(ns, key)) }); err != nil {
		return fmt.Errorf("deleting %s/%s: %w", ns, key, err)
	}
	return nil
}

// KVList returns the records of a namespace whose keys start with keyPrefix, in key order.
func (b *Store) KVList(ctx context.Context, ns, keyPrefix string) ([]cachestore.KV, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	base := kvPrefix(ns, "")
	var out []cachestore.KV
	err := b.db.View(func(txn *badgerdb.Txn) error {
		// Hex encoding of a key prefix is a prefix of the key's encoding
		// only for whole bytes, which it always is.
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: kvPrefix(ns, keyPrefix), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			k, err := unesc(bytes.TrimPrefix(it.Item().Key(), base))
			if err != nil {
				return err
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out = append(out, cachestore.KV{Key: k, Value: v})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", ns, err)
	}
	return out, nil
}

// AmendToolMessage replaces the tool message of a committed call that is
// still pending (status client_pending, or any status in pending) with m,
// and returns the amended turn record.
func (b *Store) AmendToolMessage(ctx context.Context, session, callID string, pending []string, m *messages.ToolMessage) (*messages.TurnRecord, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	return b.amend(session, callID, pending, m, nil)
}

// amend amends the call's message when its status is one of pending, and
// runs also (when set) in the same transaction.
func (b *Store) amend(session, callID string, pending []string, m *messages.ToolMessage, also func(*badgerdb.Txn) error) (*messages.TurnRecord, error) {
	var out *messages.TurnRecord
	err := b.db.Update(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: turnPrefix(session), Reverse: false})
		defer it.Close()
		var found *messages.TurnRecord
		var key []byte
		idx, settled := -1, false
		for it.Rewind(); it.Valid(); it.Next() {
			rec, err := readTurn(txn, it.Item())
			if err != nil {
				return err
			}
			for i, tm := range rec.ToolMessages {
				switch {
				case tm.ToolCallId != callID:
				case slices.Contains(pending, tm.Status):
					found, key, idx = rec, it.Item().KeyCopy(nil), i
				default:
					settled = true
				}
			}
		}
		switch {
		case found == nil && settled:
			return cachestore.ErrAlreadySettled
		case found == nil:
			return cachestore.ErrNotFound
		}
		found.ToolMessages[idx] = cachestore.AmendedMessage(found.ToolMessages[idx], m)
		v, err := proto.Marshal(found)
		if err != nil {
			return err
		}
		out = found
		if also != nil {
			if err := also(txn); err != nil {
				return err
			}
		}
		return setChunked(txn, key, v, 0)
	})
	if err != nil {
		return nil, fmt.Errorf("amending call %q of session %q: %w", callID, session, tooLarge(err))
	}
	return out, nil
}
