// Package attack holds the attack set of docs/RELIABILITY.md as tests: each
// hostile turn goes through the whole dispatcher (preflight, gate, built-in
// and web tools, secrets) and must fail closed with a clear status.
package attack
