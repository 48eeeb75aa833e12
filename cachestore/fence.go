package cachestore

import "errors"

// ErrFenced: a write (WriteIntent, CommitTurn, AmendToolMessage) was refused
// because another writer took the session over since this one loaded it.
//
// Stores shared by several processes (Postgres) fence writers: every
// LoadSession takes the session over by incrementing its epoch in the store,
// in the transaction that resolves a leftover intent, and the process keeps
// the epoch it got. A write checks, in its own transaction and under the
// session row's lock, that the stored epoch is still the one the process
// holds; when a LoadSession elsewhere (a session grain re-activated on
// another member after a partition) bumped it, the write fails with ErrFenced
// and changes nothing. The fenced writer must stop writing the session: its
// state is stale. Loading the session again takes it back (and fences the
// other writer in turn). Single-process stores (Badger, Memory) never return
// it.
var ErrFenced = errors.New("cachestore: session taken over by another writer")
