// Package cachestore persists what tooldispatch must not lose: sessions
// (committed turns, from which the Tools and ToolHistories views are read),
// per-run state (de-duplication table, fetched schemas), intent records of
// calls that may have started, the 30-minute result cache, file versions and
// the records of other packages (secrets, the error memory).
//
// The package holds the interfaces, the records they carry and what every
// store shares (intent resolution, the record codecs, the sentinel errors);
// the stores that keep data elsewhere live in packages of their own, so a
// program links only the engine it opens:
//
//	badger.Open(badger.Options{Dir: dir})  // cachestore/badger: embedded, the default
//	postgres.Open(ctx, postgres.Options{…}) // cachestore/postgres: shared by a cluster
//	cachestore.NewMemory()                  // here: in memory, same semantics
//
// Split keeps a cluster member's cache in its own store while the rest is
// shared, and cachestore/storetest is the contract any implementation runs
// in its tests.
//
// Callers see a store through the small interface of what they use:
// SessionStore for a session's single writer (the dispatcher's commit
// actor), History for readers of committed sessions, CacheStore, KVStore
// and VersionStore for the tools, Lifecycle for the program that opens the
// store; Store composes them all. Tools declare interfaces of their own,
// which these satisfy, and never import the package.
//
// The package knows nothing of actors or tools and must not import them,
// nor Badger, pgx or any cluster transport.
package cachestore
