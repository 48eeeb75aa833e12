package toolkit

import "time"

// Observer receives measurements of the dispatcher and its tools (the
// service turns them into Prometheus metrics). Implementations must be cheap
// and safe for concurrent use. NopObserver does nothing.
type Observer interface {
	// SlotWait: how long a call waited for a concurrency slot.
	SlotWait(tool string, d time.Duration)
	// Executed: a call ran for d and ended with status.
	Executed(tool, status string, d time.Duration)
	// CallDone: every call's final status, executed or decided in pass 1.
	CallDone(tool, status string)
	// Committed: a turn of calls calls was written in d.
	Committed(calls int, d time.Duration)
	// ConfirmWait: a confirmation was answered (or timed out) after d.
	ConfirmWait(tool string, approved bool, d time.Duration)
	// InFlight: delta calls started (+1) or ended (-1).
	InFlight(delta int)
	// Cache: a result-cache lookup of tool hit or missed.
	Cache(tool string, hit bool)
	// Abandoned: a call that ignored its context was abandoned.
	Abandoned(tool string)
	// Injected: chaos mode injected fault into a call of tool.
	Injected(tool, fault string)
}

// NopObserver is an Observer that does nothing.
type NopObserver struct{}

func (NopObserver) SlotWait(string, time.Duration)          {}
func (NopObserver) Executed(string, string, time.Duration)  {}
func (NopObserver) CallDone(string, string)                 {}
func (NopObserver) Committed(int, time.Duration)            {}
func (NopObserver) ConfirmWait(string, bool, time.Duration) {}
func (NopObserver) InFlight(int)                            {}
func (NopObserver) Cache(string, bool)                      {}
func (NopObserver) Abandoned(string)                        {}
func (NopObserver) Injected(string, string)                 {}
