// Package faults injects storage faults at the store's seam
// (cachestore/seam): a write that fails before anything is written, a full
// disk, a write applied and then reported failed (a failing fsync), a slow
// fsync, a stall, a failing read. Rules pick the operations by kind and by
// count ("the 3rd commit"), for tests; a Decide function picks them from a
// seeded policy, for chaos mode. Every injected fault is reported to
// OnInject and kept in Injected.
//
// It knows nothing of actors, tools, Badger or PostgreSQL: it wraps any
// cachestore.Store.
package faults
