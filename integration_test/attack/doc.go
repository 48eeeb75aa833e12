// Package attack holds the attack set of docs/RELIABILITY.md as tests: each
// hostile turn goes through the whole dispatcher (preflight, gate, built-in
// and web tools, secrets) and must fail closed with a clear status.
//
// It knows the dispatcher only through its public API and must not weaken
// a tool or a policy to make an attack fail.
package attack
