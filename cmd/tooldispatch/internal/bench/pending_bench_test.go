package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkPendingPage: 100 000 deferred approvals over 2 000 sessions
// (50 a session, under the 64 one session may keep). "first" reads the
// first page of 50, "anywhere" a page of 50 at places spread over the
// whole listing (the cursors of a walk), reporting the page's time, its
// bytes and the live heap left after the loop (the service's memory
// across listings: flat when near 0); "walk" reads every page, reporting
// the peak of the heap above where it started and what is left after.
func BenchmarkPendingPage(b *testing.B) {
	ctx := context.Background()
	p, err := StartPendingService(ctx, PendingSeed{Sessions: 2000, Deferred: 50})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	var cursors []string
	for cursor := ""; ; {
		pg, err := p.Page(ctx, "limit=50", cursor)
		if err != nil {
			b.Fatal(err)
		}
		cursors = append(cursors, cursor)
		if cursor = pg.Next; cursor == "" {
			break
		}
	}
	b.Logf("%d approvals waiting, %d pages of 50", p.Items, len(cursors))
	page := func(b *testing.B, cursorOf func(i int) string) {
		before := heap().HeapAlloc
		b.ReportAllocs()
		bytes, i := 0, 0
		cpu0 := cpuTime()
		for b.Loop() {
			pg, err := p.Page(ctx, "limit=50", cursorOf(i))
			if err != nil || pg.Items != 50 {
				b.Fatalf("page %d: %d items, %v", i, pg.Items, err)
			}
			bytes += pg.Bytes
			i++
		}
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1e3/float64(i), "cpu-ms/page")
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(i), "ms/page")
		b.ReportMetric(float64(bytes)/float64(i)/1024, "KiB/page")
		b.ReportMetric(float64(int64(heap().HeapAlloc)-int64(before))/(1<<20), "MiB-heap-left")
	}
	b.Run("first", func(b *testing.B) { page(b, func(int) string { return "" }) })
	b.Run("anywhere", func(b *testing.B) {
		page(b, func(i int) string { return cursors[(i*7919)%(len(cursors)-1)] })
	})
	b.Run("walk", func(b *testing.B) {
		var peak, left int64
		n := 0
		for b.Loop() {
			peak, left = HeapPeak(func() {
				if items, _, err := p.Walk(ctx, "limit=50"); err != nil || items != p.Items {
					b.Fatalf("a walk read %d of %d items: %v", items, p.Items, err)
				}
			})
			n++
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(n), "ms/walk")
		b.ReportMetric(float64(peak)/(1<<20), "MiB-peak")
		b.ReportMetric(float64(left)/(1<<20), "MiB-heap-left")
	})
}

// BenchmarkPendingBigTurns: the shape of issue 35 — 40 sessions, each a
// turn of 4 096 calls (about 400 KB) of which 64 edits wait for approval.
// "page" reads the first page of 50 (time, bytes), "page_with_turn" the
// same with its turn (include=turn), "8_walks" has 8 clients read every
// page at once, reporting the peak of the heap above where it started.
func BenchmarkPendingBigTurns(b *testing.B) {
	ctx := context.Background()
	p, err := StartPendingService(ctx, PendingSeed{Sessions: 40, Deferred: 64, Others: 4032})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	b.Logf("%d approvals waiting; each turn record %d bytes", p.Items, p.TurnBytes)
	for _, tc := range []struct{ name, query string }{{"page", "limit=50"}, {"page_with_turn", "limit=50&include=turn"}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			bytes, i := 0, 0
			cpu0 := cpuTime()
			for b.Loop() {
				pg, err := p.Page(ctx, tc.query, "")
				if err != nil || pg.Items != 50 {
					b.Fatalf("%d items, %v", pg.Items, err)
				}
				bytes += pg.Bytes
				i++
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1e3/float64(i), "cpu-ms/page")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(i), "ms/page")
			b.ReportMetric(float64(bytes)/float64(i)/1024, "KiB/page")
		})
	}
	b.Run("8_walks", func(b *testing.B) {
		var peak int64
		n := 0
		for b.Loop() {
			var failed atomic.Pointer[error]
			top, _ := HeapPeak(func() {
				var wg sync.WaitGroup
				for range 8 {
					wg.Go(func() {
						if items, _, err := p.Walk(ctx, "limit=50"); err != nil || items != p.Items {
							failed.Store(&err)
						}
					})
				}
				wg.Wait()
			})
			if err := failed.Load(); err != nil {
				b.Fatalf("a walk: %v", *err)
			}
			peak = max(peak, top)
			n++
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(n), "ms/8-walks")
		b.ReportMetric(float64(peak)/(1<<20), "MiB-peak")
	})
}
