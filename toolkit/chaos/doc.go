// Package chaos decides, from a seeded policy, which faults to inject into
// tool calls instead of running them: errors, timeouts, latency, truncated,
// garbled or empty output, HTTP 429/500/503, denied confirmations; and,
// from the operator's storage rules, which store operations to fail or
// slow: a full disk, a write error, a failing or slow fsync, a stall.
//
// Every decision is a pure function of the seed and facts that do not
// depend on scheduling: for a call, the run, the call's position (turn and
// index) and the tool's name; for a store operation, its name, session,
// run, turn, key and how many times the same operation came before. So the
// same seed injects the same faults at the same calls and operations
// whatever the scheduling, and the schedule of tool faults can be printed
// before a run (Policy.Plan). Report reads a persisted session afterwards
// and says what the agent did after each injected tool fault; it reads
// calls with the same rules as pass 1 (toolkit.ResolveCall).
// StorageReport pairs the storage faults a process recorded with what the
// client of each turn was answered.
//
// It knows nothing of actors, the store or the command line: it knows store
// operations by name only, decides and classifies, and its callers inject,
// persist and print.
package chaos
