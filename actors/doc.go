// Package actors runs turns of tool calls on protoactor-go actors.
//
// The tree (one concern each, goroutine mailboxes, no shared mutable state):
//
//	dispatcher ── session (one per session id, passivated when idle)
//	                ├── commit (single writer of everything the session persists)
//	                └── turn (one per turn, one at a time per session)
//	                      ├── preflight (pass 1, one call at a time)
//	                      └── pool (pass 2) ── call (one child per call)
//
// Use New for a dispatcher that owns its actor system, or Spawn to run one
// inside the caller's system. Every request gets exactly one reply.
//
// The package knows tools only through toolkit and storage only through
// cachestore.Store.
package actors
