// Package chaos is the fault-injection harness of tooldispatch's reliability
// tests: a store that fails, stalls or panics on write, tools that panic,
// hang, ignore cancellation or flood output, and an observer that counts what
// the dispatcher reports. Every fault is contained to the call or turn it
// hits; the tests in this package show it. See docs/RELIABILITY.md.
//
// It knows the dispatcher only through its public API and the faults it
// injects: a fault is contained or the test fails, never worked around here.
package chaos
