// Package actors runs turns of tool calls on protoactor-go actors.
//
// The tree (one concern each):
//
//	dispatcher ── session (one per session id, only while it has work)
//	                ├── commit (single writer of everything the session persists)
//	                └── turn (one per turn, one at a time per session)
//	                      ├── preflight (pass 1 from the first call that waits)
//	                      └── pool (pass 2) ── call (at most MaxConcurrency, reused from call to call)
//
// The commit and call actors, which wait (on the store, on tools), have
// a mailbox goroutine each; the dispatcher and session actors too. So has
// the turn, which does CPU work in its Receive: pass 1 runs the rules of
// SPEC §3 one call at a time there, and hands what has to wait (a
// confirmation, a file stamp) to a preflight actor, which takes it on a
// goroutine of its own and goes on when the answer comes back as a
// message. Only the pool, which coordinates and does little else (no I/O,
// no store call, no person), runs on protoactor's synchronized dispatcher,
// on the goroutine of whoever sends to it: no goroutine hand-off per call.
//
// A turn is prepared once (Prepare, or on arrival from another member):
// its policy settled, its tools view built, its calls' arguments parsed.
// In this process the *Prepared itself is the message that carries the
// turn to its session's actors.
//
// Actors share state by messages. What is owned moves: a session's loaded
// state goes from the dispatcher to the session's commit actor and back
// when the session is idle, and a run's state is lent by the commit actor
// to the turn (and by the turn to pass 1) and handed back with the commit.
// The exceptions, each small and guarded: a turn's emitter (a mutex orders
// the event numbers its pool and call actors take), the settle state of a
// running call (an atomic the call actor and the pool's watchdog race on;
// the first to swap it decides), the question board of ask_user (a mutex;
// answers come from outside the tree), the Dispatcher's map of cancel
// functions (a mutex), the drain board of a cluster member (a mutex) and
// the process-wide count of abandoned calls (atomics, read by
// AbandonedCalls).
//
// Use New for a dispatcher that owns its actor system, or Spawn to run one
// inside the caller's system. Every request gets exactly one reply. A
// session actor speaks one protocol, the protobuf requests of package
// messages (see Router), so the same session code serves in one process
// and as a cluster grain (package actors/cluster, through NewRouted); every
// event of a turn carries its request id.
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
