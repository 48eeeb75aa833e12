package bench

import (
	"context"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// countingStore counts the store calls a dispatcher makes.
type countingStore struct {
	cachestore.Store
	intents, commits, loads atomic.Int64
	// nanos is the time spent in WriteIntent and CommitTurn: the store's
	// part of a turn as the workload meets it (memtable flushes included).
	nanos atomic.Int64
}

func (c *countingStore) WriteIntent(ctx context.Context, in *cachestore.Intent) error {
	c.intents.Add(1)
	t0 := time.Now()
	defer func() { c.nanos.Add(time.Since(t0).Nanoseconds()) }()
	return c.Store.WriteIntent(ctx, in)
}

func (c *countingStore) CommitTurn(ctx context.Context, t *cachestore.TurnCommit) error {
	c.commits.Add(1)
	t0 := time.Now()
	defer func() { c.nanos.Add(time.Since(t0).Nanoseconds()) }()
	return c.Store.CommitTurn(ctx, t)
}

func (c *countingStore) LoadSession(ctx context.Context, session string) (cachestore.SessionState, error) {
	c.loads.Add(1)
	return c.Store.LoadSession(ctx, session)
}

// goroutinesCreated is the process's count of goroutines created so far:
// on protoactor's default dispatcher, one per mailbox run that found the
// mailbox idle (a hand-off).
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// benchTurns runs b.N turns of tools, one after another in one session,
// on each of (a), (b) and (c), and reports per turn: time, allocations,
// the store's intents and commits, Badger's transactions and the
// goroutines created (hand-offs).
func benchTurns(b *testing.B, tools []string) {
	for _, kind := range []string{SysBadger, SysMemory, SysBare} {
		b.Run(kind[:1], func(b *testing.B) {
			var cs *countingStore
			s, err := openSystemWith(kind, false, 3, 0, func(st cachestore.Store) cachestore.Store {
				cs = &countingStore{Store: st}
				return cs
			})
			if err != nil {
				b.Fatal(err)
			}
			defer s.close()
			ctx := context.Background()
			if err := s.dispatch(ctx, Turn("turns", 0, tools, 0)); err != nil {
				b.Fatal(err)
			}
			bs, _ := s.store.(*badger.Store)
			var st0 badger.CommitStats
			if bs != nil {
				st0 = bs.CommitStats()
			}
			i0, c0, ns0 := cs.intents.Load(), cs.commits.Load(), cs.nanos.Load()
			g0 := goroutinesCreated()
			b.ReportAllocs()
			i := 1
			for b.Loop() {
				if err := s.dispatch(ctx, Turn("turns", i, tools, 0)); err != nil {
					b.Fatal(err)
				}
				i++
			}
			n := float64(i - 1)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/turn")
			b.ReportMetric(float64(goroutinesCreated()-g0)/n, "goroutines/turn")
			b.ReportMetric(float64(cs.intents.Load()-i0)/n, "intents/turn")
			b.ReportMetric(float64(cs.commits.Load()-c0)/n, "commits/turn")
			b.ReportMetric(float64(cs.nanos.Load()-ns0)/n, "store-ns/turn")
			if bs != nil {
				st := bs.CommitStats()
				b.ReportMetric(float64(st.Txns-st0.Txns)/n, "txns/turn")
			}
		})
	}
}

// BenchmarkOneCallTurn: one-call turns, no-op and calculate, on (a), (b)
// and (c) (the targets: (a) ≤ 1.15 × (c)).
func BenchmarkOneCallTurn(b *testing.B) {
	b.Run("noop", func(b *testing.B) { benchTurns(b, []string{"noop"}) })
	b.Run("calculate", func(b *testing.B) { benchTurns(b, []string{calculate}) })
}

// BenchmarkFourCallTurn: the 4-call mixed turn (FourCallTools) on (a),
// (b) and (c) (the target: (a) ≤ 1.15 × (c)).
func BenchmarkFourCallTurn(b *testing.B) {
	benchTurns(b, FourCallTools)
}

// BenchmarkHundredCallTurn: BenchmarkNoOpTurn with the counts per turn.
func BenchmarkHundredCallTurn(b *testing.B) {
	benchTurns(b, repeat("noop", 100))
}

// BenchmarkPrimPreflight: parse, canonical form, cached schema, validation
// and de-dup key of one no-op call, what (a) and (c) both do per call.
func BenchmarkPrimPreflight(b *testing.B) {
	cache := toolkit.NewSchemaCache()
	b.ReportAllocs()
	for b.Loop() {
		a, err := toolkit.ParseArgs(`{"i":12345}`, toolkit.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		s, err := cache.Compile([]byte(NoopSchema))
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Validate(a.Value); err != nil {
			b.Fatal(err)
		}
		_ = toolkit.DedupKey("noop", a)
		_ = a.Hash()
	}
}

// BenchmarkPrimSemaphore: 100 no-op goroutines run under a channel
// semaphore of 3 and waited for, per call: the bare dispatcher's pass 2.
func BenchmarkPrimSemaphore(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sem := make(chan struct{}, 3)
		var wg sync.WaitGroup
		for range 100 {
			sem <- struct{}{}
			wg.Go(func() {
				_, cancel := context.WithTimeout(context.Background(), time.Minute)
				cancel()
				<-sem
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/call")
}
