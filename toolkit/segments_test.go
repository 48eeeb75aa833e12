package toolkit

import (
	"fmt"
	"testing"
)

func TestSegments(t *testing.T) {
	for _, tc := range []struct {
		name  string
		calls string // c: concurrent, s: sequential
		want  string
	}{
		{name: "none", calls: "", want: "[]"},
		{name: "one concurrent", calls: "c", want: "[c]"},
		{name: "concurrent run", calls: "ccc", want: "[ccc]"},
		{name: "sequential each alone", calls: "ss", want: "[s s]"},
		{name: "mixed", calls: "ccsccs", want: "[cc s cc s]"},
		{name: "sequential first", calls: "scc", want: "[s cc]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			segs := Segments([]byte(tc.calls), func(b byte) bool { return b == 'c' })
			var parts []string
			for _, s := range segs {
				parts = append(parts, string(s))
			}
			if got := fmt.Sprint(parts); got != tc.want {
				t.Errorf("Segments(%q) = %s, want %s", tc.calls, got, tc.want)
			}
		})
	}
}
