package toolkit

// Segments splits a turn's executable calls, in call order, into pass 2's
// segments (SPEC §3, pass 2): each maximal run of consecutive calls for
// which concurrent is true is one segment, run in parallel under the
// limit; every other call is a segment of its own, which starts after
// every earlier segment has ended and ends before any later one starts.
// The segments share calls' backing array.
func Segments[T any](calls []T, concurrent func(T) bool) [][]T {
	var segs [][]T
	for i := 0; i < len(calls); {
		j := i + 1
		if concurrent(calls[i]) {
			for j < len(calls) && concurrent(calls[j]) {
				j++
			}
		}
		segs = append(segs, calls[i:j])
		i = j
	}
	return segs
}
