// Package chaos decides, from a seeded policy, which faults to inject into
// tool calls instead of running them: errors, timeouts, latency, truncated,
// garbled or empty output, HTTP 429/500/503, denied confirmations.
//
// Every decision is a pure function of the seed, the run, the call's
// position (turn and index) and the tool's name, so the same seed injects
// the same faults at the same calls whatever the scheduling order, and the
// schedule can be printed before a run (Policy.Plan). Report reads a
// persisted session afterwards and says what the agent did after each
// injected fault; it reads calls with the same rules as pass 1
// (toolkit.ResolveCall).
//
// It knows nothing of actors, storage or the command line: it decides and
// classifies, and its callers inject, persist and print.
package chaos
