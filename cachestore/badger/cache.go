package badger

import (
	"context"
	"errors"
	"fmt"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/tooldispatch/tooldispatch/cachestore"
)

// cacheCleanupGrace is how long after its absolute expiry Badger's own TTL
// drops a cache entry. Expiry itself is decided on read against the stored
// absolute time; Badger's TTL has whole-second granularity and only frees
// space.
const cacheCleanupGrace = time.Minute

// cacheKV prepares the write of one cache entry.
func cacheKV(e cachestore.CacheEntry) kv {
	w := kv{key: cacheKey(e.Key), value: encodeCache(e)}
	if !e.Expires.IsZero() {
		at := e.Expires.Add(cacheCleanupGrace).Unix() + 1
		w.expiresAt = uint64(max(at, 1))
	}
	return w
}

// CacheGet returns the cached value if it exists and now is before its
// absolute expiry. A hit does not extend the expiry.
func (b *Store) CacheGet(ctx context.Context, key string, now time.Time) ([]byte, bool, error) {
	if err := b.enter(); err != nil {
		return nil, false, fmt.Errorf("reading cache entry %q: %w", key, err)
	}
	defer b.leave()
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("reading cache entry %q: %w", key, err)
	}
	var (
		value   []byte
		expires int64
		has     bool
	)
	err := b.db.View(func(txn *badgerdb.Txn) error {
		item, err := txn.Get(cacheKey(key))
		if err != nil {
			return err
		}
		raw, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		value, expires, has, err = decodeCache(raw)
		return err
	})
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading cache entry %q: %w", key, err)
	}
	if !cacheLive(expires, has, now) {
		return nil, false, nil
	}
	if value == nil {
		value = []byte{}
	}
	return value, true, nil
}

// CachePut stores (or replaces) a value with an absolute expiry; a zero
// Expires never expires. It returns once the write is durable.
func (b *Store) CachePut(ctx context.Context, e cachestore.CacheEntry) error {
	if err := b.enter(); err != nil {
		return fmt.Errorf("writing cache entry %q: %w", e.Key, err)
	}
	defer b.leave()
	if err := b.submit(ctx, &writeOp{main: []kv{cacheKV(e)}}); err != nil {
		return fmt.Errorf("writing cache entry %q: %w", e.Key, err)
	}
	return nil
}
