// Package seam wraps a cachestore.Store so that something can stand
// between the dispatcher and the store: every operation is described by an
// Op and passed to a Hook before it runs (which may refuse it) and after
// (which may change what the caller gets). cachestore/space keeps a
// free-space reserve there; cachestore/faults injects storage faults there
// (tests, and chaos mode).
//
// The wrapper holds no state of its own and adds no behaviour: with a hook
// that refuses nothing it is the wrapped store. It knows nothing of actors,
// tools, Badger or PostgreSQL.
package seam
