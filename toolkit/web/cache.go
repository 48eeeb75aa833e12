package web

import (
	"context"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// CacheStore is the TTL cache the web tools keep fetched pages in: two
// methods of the embedding program's store (cachestore's Badger, Memory and
// PostgreSQL stores satisfy it). Implementations are safe for concurrent use.
type CacheStore interface {
	// CacheGet returns the value stored under key and true when it exists
	// and now is before its absolute expiry; false (and no error) when it
	// is missing or expired. It never compares against its own clock.
	CacheGet(ctx context.Context, key string, now time.Time) ([]byte, bool, error)
	// CachePut stores e.Value under e.Key until e.Expires, replacing any
	// earlier value; a zero Expires never expires.
	CachePut(ctx context.Context, e toolkit.CacheEntry) error
}

// CacheFromStore adapts a CacheStore to toolkit.Cache: absolute expiry,
// checked on read against the time the caller passes.
func CacheFromStore(s CacheStore) toolkit.Cache { return storeCache{s: s} }

type storeCache struct{ s CacheStore }

func (c storeCache) Get(ctx context.Context, key string, now time.Time) ([]byte, bool, error) {
	return c.s.CacheGet(ctx, key, now)
}

func (c storeCache) Put(ctx context.Context, e toolkit.CacheEntry) error {
	return c.s.CachePut(ctx, e)
}
