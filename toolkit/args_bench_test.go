//go:build unix

package toolkit

import (
	"bytes"
	"encoding/json"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time the process has used. Benchmarks report it beside
// wall time because on a shared machine other processes stretch wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchCall is one real τ-bench call (MIT licence, see conformance_test.go):
// its arguments as a model sends them (compact JSON text, the model's key
// order) and its tool's parameter schema.
type benchCall struct {
	name   string
	args   string
	schema []byte
}

// tauCall returns the first call of tool in a τ-bench domain.
func tauCall(b *testing.B, domain, tool string) benchCall {
	b.Helper()
	d, ok := loadTauBench(b)[domain]
	if !ok {
		b.Fatalf("no %s domain", domain)
	}
	for _, c := range d.Calls {
		if c.Name != tool {
			continue
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(argumentsText(b, c.Arguments))); err != nil {
			b.Fatal(err)
		}
		return benchCall{name: domain + "/" + tool, args: buf.String(), schema: d.Tools[tool].Parameters}
	}
	b.Fatalf("no %s call in %s", tool, domain)
	return benchCall{}
}

// BenchmarkPreflightValidatedCall measures the argument work of pass 1 for
// one call: strict parse and canonical form, schema lookup in the cache,
// validation.
func BenchmarkPreflightValidatedCall(b *testing.B) {
	calls := []benchCall{
		tauCall(b, "retail", "exchange_delivered_order_items"),
		tauCall(b, "airline", "book_reservation"),
	}
	for _, c := range calls {
		b.Run(c.name, func(b *testing.B) {
			cache := NewSchemaCache()
			if _, err := cache.Compile(c.schema); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			n := 0
			cpu0 := cpuTime()
			for b.Loop() {
				a, err := ParseArgs(c.args, Limits{})
				if err != nil {
					b.Fatal(err)
				}
				s, err := cache.Compile(c.schema)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Validate(a.Value); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/call")
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(n), "cpu-ns/call")
		})
	}
}

// BenchmarkParseArgs measures ParseArgs alone on the same calls.
func BenchmarkParseArgs(b *testing.B) {
	calls := []benchCall{
		tauCall(b, "retail", "exchange_delivered_order_items"),
		tauCall(b, "airline", "book_reservation"),
	}
	for _, c := range calls {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.args)))
			for b.Loop() {
				if _, err := ParseArgs(c.args, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidate measures the cached schema lookup and validation alone.
func BenchmarkValidate(b *testing.B) {
	calls := []benchCall{
		tauCall(b, "retail", "exchange_delivered_order_items"),
		tauCall(b, "airline", "book_reservation"),
	}
	for _, c := range calls {
		b.Run(c.name, func(b *testing.B) {
			cache := NewSchemaCache()
			a, err := ParseArgs(c.args, Limits{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				s, err := cache.Compile(c.schema)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Validate(a.Value); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
