package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/web"
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

// BenchmarkCachedFetchPage measures a fetch_page cache hit (decode and
// filter) of the 20 KB page of the bench, on the in-memory store.
func BenchmarkCachedFetchPage(b *testing.B) {
	body := page20K()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	store := cachestore.NewMemory()
	w, err := web.New(web.Deps{Config: web.Config{AllowLoopback: true}, Cache: web.CacheFromStore(store)})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	var fetch toolkit.Tool
	for _, t := range w.Tools() {
		if t.Name == web.FetchPageName {
			fetch = t
		}
	}
	a, err := toolkit.ParseArgs(`{"url":"`+srv.URL+`/article","query":"watering tomatoes when leaves curl"}`, toolkit.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	call := &toolkit.Call{Session: "s", Run: "r", ID: "c1", Name: web.FetchPageName, Args: a, Emit: func(string) {}}
	ctx := context.Background()
	if _, err := fetch.Handler(ctx, call); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := fetch.Handler(ctx, call)
		if err != nil || !strings.Contains(res.Content, "from cache") {
			b.Fatal("missed the cache", err)
		}
	}
}

// BenchmarkBigTurn: 4 096-call turns of no-op tools, per call (compare
// with BenchmarkNoOpTurn: the cost per call must not grow with the turn).
func BenchmarkBigTurn(b *testing.B) {
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
				if err := s.dispatch(ctx, Turn("big", i, repeat("noop", 4096), 0)); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*4096), "ns/call")
		})
	}
}

// BenchmarkManySessions: every iteration is a fresh session's first
// 10-call turn, from as many goroutines as GOMAXPROCS × 32 (the sessions
// accumulate, as in `tooldispatch bench`'s 100 000 sessions).
func BenchmarkManySessions(b *testing.B) {
	for _, kind := range []string{SysBadger, SysMemory, SysBare} {
		b.Run(kind[:1], func(b *testing.B) {
			s, err := openSystem(kind, false, 3, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer s.close()
			ctx := context.Background()
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := "many-" + strconv.FormatInt(next.Add(1), 10)
					if err := s.dispatch(ctx, Turn(id, 0, repeat("noop", 10), 0)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(next.Load()*10), "ns/call")
		})
	}
}

// BenchmarkIdleSessions: the heap one idle session holds after a one-call
// turn, not passivated and passivated, over 500 sessions per iteration.
func BenchmarkIdleSessions(b *testing.B) {
	const n = 500
	for _, kind := range []string{SysBadger, SysMemory} {
		for _, passivated := range []bool{false, true} {
			name := kind[:1] + "/idle"
			idleAfter := time.Hour
			if passivated {
				name, idleAfter = kind[:1]+"/passivated", 20*time.Millisecond
			}
			b.Run(name, func(b *testing.B) {
				s, err := openSystem(kind, false, 3, idleAfter)
				if err != nil {
					b.Fatal(err)
				}
				defer s.close()
				ctx := context.Background()
				var perSession float64
				round := 0
				for b.Loop() {
					before := heap()
					if _, _, err := parallel(ctx, s, "idle-"+strconv.Itoa(round)+"-", n, 8, 1, 1, 0); err != nil {
						b.Fatal(err)
					}
					after := heap()
					if passivated {
						after = settledHeap(ctx, 10*time.Second)
					}
					perSession = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
					round++
				}
				b.ReportMetric(perSession, "B/session")
			})
		}
	}
}

// BenchmarkService: the service load generator, 100 clients × 5 turns of
// 10 calculate calls per iteration over HTTP on loopback.
func BenchmarkService(b *testing.B) {
	var l *ServiceLoad
	for b.Loop() {
		var err error
		l, err = RunServiceLoad(context.Background(), ServiceLoadOptions{Clients: 100, CallsPerTurn: 10, Duration: 10 * time.Second, TurnsPerClient: 5})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(l.CallsPerSecond(), "calls/s")
	b.ReportMetric(float64(l.P(0.5).Microseconds())/1e3, "p50-ms")
	b.ReportMetric(float64(l.P(0.99).Microseconds())/1e3, "p99-ms")
}

// BenchmarkSessions64: 64 sessions in parallel, 5 10-call turns each per
// iteration, with and without fsync (a-fsync, c-fsync).
func BenchmarkSessions64(b *testing.B) {
	for _, c := range []struct {
		kind  string
		fsync bool
	}{{SysBadger, false}, {SysBadger, true}, {SysMemory, false}, {SysBare, false}, {SysBare, true}} {
		name := c.kind[:1]
		if c.fsync {
			name += "-fsync"
		}
		b.Run(name, func(b *testing.B) {
			s, err := openSystem(c.kind, c.fsync, 3, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer s.close()
			ctx := context.Background()
			var before badger.CommitStats
			bs, _ := s.store.(*badger.Store)
			if bs != nil {
				before = bs.CommitStats()
			}
			b.ReportAllocs()
			round := 0
			for b.Loop() {
				if _, _, err := parallel(ctx, s, "s", 64, 64, 5, 10, round*5); err != nil {
					b.Fatal(err)
				}
				round++
			}
			b.ReportMetric(float64(round*64*5*10)/b.Elapsed().Seconds(), "calls/s")
			if bs != nil {
				// How many writes (intents and commits of all sessions)
				// shared one batch of the group committer.
				st := bs.CommitStats()
				if n := st.Batches - before.Batches; n > 0 {
					b.ReportMetric(float64(st.Ops-before.Ops)/float64(n), "ops/batch")
					b.ReportMetric(float64(st.Bytes-before.Bytes)/float64(round*64*5), "B-stored/turn")
				}
			}
		})
	}
}
