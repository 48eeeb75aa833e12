package builtin

import (
	"strconv"
	"testing"
)

// BenchmarkCalculate evaluates distinct expressions (every one a cache miss)
// and one repeated expression (a cache hit after the first).
func BenchmarkCalculate(b *testing.B) {
	b.Run("distinct", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := Calculate(strconv.Itoa(i) + " * 3"); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("repeated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Calculate("(17 * 23) % 7 + sqrt(2) * pi"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
