package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	badgerdb "github.com/dgraph-io/badger/v4"
)

// kvCreateRetries bounds the retries of a Badger KVCreate that conflicted
// with a concurrent writer of the same key.
const kvCreateRetries = 10

// KVCreate implements KVCreator.
func (b *Store) KVCreate(ctx context.Context, ns, key string, value []byte) ([]byte, bool, error) {
	if err := b.enter(); err != nil {
		return nil, false, err
	}
	defer b.leave()
	var stored []byte
	var created bool
	var err error
	for range kvCreateRetries {
		err = b.db.Update(func(txn *badgerdb.Txn) error {
			it, err := txn.Get(kvKey(ns, key))
			if err == nil {
				created = false
				stored, err = it.ValueCopy(nil)
				return err
			}
			if !errors.Is(err, badgerdb.ErrKeyNotFound) {
				return err
			}
			stored, created = bytes.Clone(value), true
			return txn.Set(kvKey(ns, key), value)
		})
		if !errors.Is(err, badgerdb.ErrConflict) {
			break
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("creating %s/%s: %w", ns, key, tooLarge(err))
	}
	return stored, created, nil
}
