// Package integration drives tooldispatch end to end: golden scenarios
// of whole turns through the actors with the built-in tools on a real Badger
// store and workspace, and the tooldispatch binary as a child process
// (crash safety).
package integration
