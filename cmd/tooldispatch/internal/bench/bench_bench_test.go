package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/cachestore"
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
