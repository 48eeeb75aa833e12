// Package postgres is a cachestore.Store in a PostgreSQL database shared by
// the members of a cluster: Open connects and applies the embedded schema
// migrations (migrations/NNNN_name.sql, each once, in order), and Store
// fences writers per session (cachestore.ErrFenced).
//
// It is a package of its own so that a program without PostgreSQL (the
// in-memory embedder, a single process on Badger) does not link pgx:
// cachestore must not import it. It knows the Store contract, the record
// formats cachestore exports for stores (EncodeIntent, EncodeDedup,
// MarshalValid) and the messages; it must not know actors, tools or the
// cluster's transport. Its tests run the contract of cachestore/storetest
// against a throwaway server started by scripts/pg-test-server.sh.
package postgres
