package web

import (
	"context"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// CacheFromStore adapts a cachestore.Store's TTL cache (Badger or Memory)
// to toolkit.Cache: absolute expiry, checked on read against the time the
// caller passes.
func CacheFromStore(s cachestore.Store) toolkit.Cache { return storeCache{s: s} }

type storeCache struct{ s cachestore.Store }

func (c storeCache) Get(ctx context.Context, key string, now time.Time) ([]byte, bool, error) {
	return c.s.CacheGet(ctx, key, now)
}

func (c storeCache) Put(ctx context.Context, e toolkit.CacheEntry) error {
	return c.s.CachePut(ctx, cachestore.CacheEntry{Key: e.Key, Value: e.Value, Expires: e.Expires})
}
