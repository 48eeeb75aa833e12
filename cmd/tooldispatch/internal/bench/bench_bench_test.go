package bench

import (
	"context"
	"testing"
)

// BenchmarkWorkloads runs every workload of `tooldispatch bench` once in
// quick mode; it is the smoke run of CI (go test -run XXX -bench . -benchtime 1x).
func BenchmarkWorkloads(b *testing.B) {
	for b.Loop() {
		rep, err := Run(context.Background(), Options{Quick: true, Rounds: 1, NoPeers: true})
		if err != nil {
			b.Fatal(err)
		}
		for _, row := range rep.Rows {
			b.Logf("%s / %s: %.3f %s", row.Workload, row.System, row.Median, row.Unit)
		}
	}
}

// BenchmarkNoOpTurn compares the systems on 100-call turns of no-op tools.
func BenchmarkNoOpTurn(b *testing.B) {
	for _, kind := range []string{SysBadger, SysMemory, SysBare} {
		b.Run(kind[:1], func(b *testing.B) {
			s, err := openSystem(kind, false, 3, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer s.close()
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := s.dispatch(ctx, Turn("noop", i, repeat("noop", 100), 0)); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*100), "ns/call")
		})
	}
}
