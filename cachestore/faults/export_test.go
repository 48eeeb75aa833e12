package faults

// TrackedAttempts is how many attempt counts in keeps.
func TrackedAttempts(in *Injector) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := len(in.other)
	for _, m := range in.turns {
		n += len(m.byKey)
	}
	return n
}
