// Package memory holds the tools that let a model remember: the error memory
// (write_error, error_history, and PastFixes, which the dispatcher consults
// for every failed call) and chat_history, a keyword search over the
// session's committed turns.
//
// Error records are kept per workspace, in the KV namespace
// "errors/<hash of the workspace directory>", so two projects never see each
// other's fixes. Processes sharing one store (cluster members) open it with
// Shared: reads notice records the others added and writes claim their
// numbers atomically. chat_history reads the session's turns through
// Store.Turns and writes nothing.
//
// The package knows nothing of actors or of how the store keeps its data:
// it sees the store through its own four-method Store interface (which
// cachestore's stores satisfy; the embedding program wires one in) and the
// calls through toolkit.Call. It must not import cachestore.
package memory
