// Package actors runs turns of tool calls on protoactor-go actors.
//
// The tree (one concern each, goroutine mailboxes):
//
//	dispatcher ── session (one per session id, passivated when idle)
//	                ├── commit (single writer of everything the session persists)
//	                └── turn (one per turn, one at a time per session)
//	                      ├── preflight (pass 1, one call at a time)
//	                      └── pool (pass 2) ── call (at most MaxConcurrency, reused from call to call)
//
// Actors share state by messages, with these exceptions, each small and
// guarded: a turn's emitter (a mutex orders the event numbers its pool and
// call actors take), the settle state of a running call (an atomic the call
// actor and the pool's watchdog race on; the first to swap it decides), the
// question board of ask_user (a mutex; answers come from outside the tree),
// the Dispatcher's map of cancel functions (a mutex), the turns Dispatch
// prepared, handed to their turn actors (a sync.Map, each entry taken once)
// and the process-wide count of abandoned calls (atomics, read by
// AbandonedCalls).
//
// Use New for a dispatcher that owns its actor system, or Spawn to run one
// inside the caller's system. Every request gets exactly one reply. A
// session actor speaks one protocol, the protobuf requests of package
// messages (see Router), so the same actor serves in one process and as a
// cluster grain (package actors/cluster, through NewRouted).
//
// The package knows tools only through toolkit (which also holds the rules
// that read a call: toolkit.ResolveCall) and storage only through
// cachestore.SessionStore, what a session's commit actor writes through.
// It must not know HTTP, the command line, how a store
// keeps its data (no cachestore/postgres, no Badger) or which tools exist:
// a tool is what the registry says.
// It must not know clusters: membership, remoting and gRPC live in
// actors/cluster, behind Router, so an embedder that runs in one process
// links none of them.
package actors
