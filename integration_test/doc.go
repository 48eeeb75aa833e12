// Package integration drives tooldispatch end to end: golden scenarios
// of whole turns through the actors with the built-in tools on a real Badger
// store and workspace, and the tooldispatch binary as a child process
// (crash safety).
//
// It drives tooldispatch only through its public APIs and its binary: it
// must not reach into unexported state, so what passes here holds for an
// embedder too.
package integration
