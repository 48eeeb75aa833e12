package cachestore

import (
	"context"
	"time"
)

// Split is a Store whose sessions, runs, intents, approvals and KV records
// live in Shared (PostgreSQL for a cluster) while the 30-minute result
// cache stays in Local (each member's own Badger). The cache entries of a
// commit are written to Local after the shared commit succeeded: the cache
// is best effort and never holds anything a turn needs. File versions
// asked of a Split go to Shared too, but a cluster member's tools keep
// theirs in Local, since they describe the member's own workspace files
// (the command hands the file tools the local store: belt.Config.Versions).
type Split struct {
	Store       // the shared store
	Local Store // the member's cache
}

// CacheGet reads the local cache.
func (s Split) CacheGet(ctx context.Context, key string, now time.Time) ([]byte, bool, error) {
	return s.Local.CacheGet(ctx, key, now)
}

// CachePut writes the local cache.
func (s Split) CachePut(ctx context.Context, e CacheEntry) error { return s.Local.CachePut(ctx, e) }

// CommitTurn commits to the shared store, then writes the turn's cache
// entries locally.
func (s Split) CommitTurn(ctx context.Context, c *TurnCommit) error {
	shared := *c
	shared.CachePut = nil
	if err := s.Store.CommitTurn(ctx, &shared); err != nil {
		return err
	}
	for _, e := range c.CachePut {
		_ = s.Local.CachePut(ctx, e)
	}
	return nil
}

// Close closes both stores.
func (s Split) Close() error {
	err := s.Store.Close()
	if lerr := s.Local.Close(); err == nil {
		err = lerr
	}
	return err
}

// KVCreate implements KVCreator on the shared store.
func (s Split) KVCreate(ctx context.Context, ns, key string, value []byte) ([]byte, bool, error) {
	c, ok := s.Store.(KVCreator)
	if !ok {
		return nil, false, ErrNoKVCreate
	}
	return c.KVCreate(ctx, ns, key, value)
}

// SetTaskLookup implements TaskResolver on the shared store, which keeps
// the intents.
func (s Split) SetTaskLookup(l TaskLookup) {
	if r, ok := s.Store.(TaskResolver); ok {
		r.SetTaskLookup(l)
	}
}
