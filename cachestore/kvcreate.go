package cachestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// KVCreator is a store that can write a KV record only while its key is
// free: what processes sharing one store (a cluster's members) need to
// agree on a value (the secrets' key) or to hand out numbers (the error
// memory's records) without overwriting each other. Badger, Memory, Split
// (over a KVCreator) and the PostgreSQL store implement it; it is not part
// of Store, so that stores written elsewhere keep satisfying Store.
type KVCreator interface {
	// KVCreate stores value under key when the key holds nothing, and
	// returns the value the key holds afterwards: value itself with
	// created true, or the earlier value with created false.
	KVCreate(ctx context.Context, ns, key string, value []byte) (stored []byte, created bool, err error)
}

// kvCreateRetries bounds the retries of a Badger KVCreate that conflicted
// with a concurrent writer of the same key.
const kvCreateRetries = 10

// KVCreate implements KVCreator.
func (b *Badger) KVCreate(ctx context.Context, ns, key string, value []byte) ([]byte, bool, error) {
	if err := b.enter(); err != nil {
		return nil, false, err
	}
	defer b.leave()
	var stored []byte
	var created bool
	var err error
	for range kvCreateRetries {
		err = b.db.Update(func(txn *badger.Txn) error {
			it, err := txn.Get(kvKey(ns, key))
			if err == nil {
				created = false
				stored, err = it.ValueCopy(nil)
				return err
			}
			if !errors.Is(err, badger.ErrKeyNotFound) {
				return err
			}
			stored, created = bytes.Clone(value), true
			return txn.Set(kvKey(ns, key), value)
		})
		if !errors.Is(err, badger.ErrConflict) {
			break
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("creating %s/%s: %w", ns, key, tooLarge(err))
	}
	return stored, created, nil
}

// KVCreate implements KVCreator.
func (m *Memory) KVCreate(ctx context.Context, ns, key string, value []byte) ([]byte, bool, error) {
	if err := m.lock(ctx); err != nil {
		return nil, false, err
	}
	defer m.mu.Unlock()
	if v, ok := m.kv[ns+"\x00"+key]; ok {
		return bytes.Clone(v), false, nil
	}
	if m.kv == nil {
		m.kv = map[string][]byte{}
	}
	m.kv[ns+"\x00"+key] = bytes.Clone(value)
	return bytes.Clone(value), true, nil
}

// ErrNoKVCreate: the store under a Split does not implement KVCreator.
var ErrNoKVCreate = errors.New("cachestore: the store cannot create records atomically")

// KVCreate implements KVCreator on the shared store.
func (s Split) KVCreate(ctx context.Context, ns, key string, value []byte) ([]byte, bool, error) {
	c, ok := s.Store.(KVCreator)
	if !ok {
		return nil, false, ErrNoKVCreate
	}
	return c.KVCreate(ctx, ns, key, value)
}
