package web

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

// stores returns the cache backends the tests run against: the in-memory
// Store and Badger (in memory, Small options).
func stores(t *testing.T) map[string]func(t *testing.T) toolkit.Cache {
	return map[string]func(t *testing.T) toolkit.Cache{
		"memory": func(t *testing.T) toolkit.Cache { return CacheFromStore(cachestore.NewMemory()) },
		"badger": func(t *testing.T) toolkit.Cache {
			db, err := badger.Open(badger.TestOptions(""))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return CacheFromStore(db)
		},
	}
}

// The TTL is absolute from the first write: present 1 ns before 30
// minutes, gone at 30 minutes, and a hit in between does not extend it.
func TestCacheExpiresExactlyAfter30Minutes(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := newSite(t)
			// Badger's own TTL, which only frees space, runs on the real
			// clock: start the fake one at the real time.
			clock := &fakeClock{t: time.Now()}
			t0 := clock.Now()
			obs := &cacheObserver{}
			deps := testDeps(clock)
			deps.Cache = open(t)
			deps.Observer = obs
			w := newWeb(t, deps)
			fetch := func() string {
				t.Helper()
				res, err := call(t, w, FetchPageName, "s1", obj{"url": s.URL + "/article"})
				if err != nil {
					t.Fatal(err)
				}
				return res.Content
			}

			steps := []struct {
				at     time.Duration
				hits   int // server hits after the call
				cached bool
			}{
				{at: 0, hits: 1},
				{at: 29 * time.Minute, hits: 1, cached: true}, // a hit that must not refresh the entry
				{at: 30*time.Minute - time.Nanosecond, hits: 1, cached: true},
				{at: 30 * time.Minute, hits: 2},                               // expired: fetched and stored again
				{at: 60*time.Minute - time.Nanosecond, hits: 2, cached: true}, // the new entry's own 30 minutes
				{at: 60 * time.Minute, hits: 3},
			}
			for _, st := range steps {
				clock.Set(t0.Add(st.at))
				content := fetch()
				if got := s.count("/article"); got != st.hits {
					t.Errorf("at +%v: server hits = %d, want %d", st.at, got, st.hits)
				}
				if got := strings.Contains(content, "(from cache)"); got != st.cached {
					t.Errorf("at +%v: from cache = %v, want %v", st.at, got, st.cached)
				}
			}
			if h, m := obs.hits.Load(), obs.misses.Load(); h != 3 || m != 3 {
				t.Errorf("observer saw %d hits and %d misses, want 3 and 3", h, m)
			}
		})
	}
}

func TestCacheScopes(t *testing.T) {
	s := newSite(t)
	clock := newFakeClock()
	backend := &fakeSearch{}
	deps := testDeps(clock)
	deps.Search = backend
	w := newWeb(t, deps)

	// fetch_page is shared across sessions.
	for _, session := range []string{"a", "b", "c"} {
		if _, err := call(t, w, FetchPageName, session, obj{"url": s.URL + "/article"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.count("/article"); n != 1 {
		t.Errorf("fetch_page: server hits = %d across three sessions, want 1", n)
	}
	// The same page under another spelling is the same entry.
	u, _ := url.Parse(s.URL)
	if _, err := call(t, w, FetchPageName, "d", obj{"url": "HTTP://" + strings.ToUpper(u.Host) + "/article#part"}); err != nil {
		t.Fatal(err)
	}
	if n := s.count("/article"); n != 1 {
		t.Errorf("fetch_page: another spelling fetched again (%d hits)", n)
	}

	// search_web is per session.
	for _, session := range []string{"a", "a", "b"} {
		if _, err := call(t, w, SearchWebName, session, obj{"query": "tomatoes"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := backend.count(); n != 2 {
		t.Errorf("search_web: backend calls = %d for sessions a, a, b; want 2", n)
	}

	// http_request GET is per session, written by the dispatcher from
	// Result.Cache.
	res, err := call(t, w, HTTPRequestName, "a", obj{"url": s.URL + "/json"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Cache == nil {
		t.Fatal("http_request GET returned no cache entry")
	}
	if want := `http_request|"a"|`; !strings.HasPrefix(res.Cache.Key, want) {
		t.Errorf("cache key %q does not start with %q", res.Cache.Key, want)
	}
	if want := clock.Now().Add(CacheTTL); !res.Cache.Expires.Equal(want) {
		t.Errorf("expires %v, want %v", res.Cache.Expires, want)
	}
	commit(t, w, res.Cache)

	res, err = call(t, w, HTTPRequestName, "a", obj{"url": s.URL + "/json"})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "(cached response)", `"stars":42`)
	if res.Cache != nil {
		t.Error("a cache hit handed an entry to store again")
	}
	res, err = call(t, w, HTTPRequestName, "b", obj{"url": s.URL + "/json"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Content, "(cached response)") || res.Cache == nil {
		t.Error("session b got session a's cached response")
	}
	if n := s.count("/json"); n != 2 {
		t.Errorf("http_request: server hits = %d, want 2", n)
	}

	// The http_request entry expires exactly 30 minutes after it was written.
	clock.Set(clock.Now().Add(CacheTTL - time.Nanosecond))
	res, _ = call(t, w, HTTPRequestName, "a", obj{"url": s.URL + "/json"})
	mustContain(t, res.Content, "(cached response)")
	clock.Set(clock.Now().Add(time.Nanosecond))
	res, _ = call(t, w, HTTPRequestName, "a", obj{"url": s.URL + "/json"})
	mustNotContain(t, res.Content, "(cached response)")
}

// commit writes an entry the way the dispatcher does in pass 3.
func commit(t *testing.T, w *Web, e *toolkit.CacheEntry) {
	t.Helper()
	if err := w.cache.Put(context.Background(), *e); err != nil {
		t.Fatal(err)
	}
}

func TestNoCachingWithCredentials(t *testing.T) {
	s := newSite(t)
	store := cachestore.NewMemory()
	sec := openSecrets(t, map[string]string{"TOKEN": "tok-9f8e7d6c5b4a"}, s.URL)
	obs := &cacheObserver{}
	deps := testDeps(newFakeClock())
	deps.Cache = CacheFromStore(store)
	deps.Secrets = sec
	deps.Observer = obs
	w := newWeb(t, deps)

	tests := []struct {
		name string
		tool string
		args obj
	}{
		{"authorization header", HTTPRequestName, obj{"url": s.URL + "/echo", "headers": obj{"Authorization": "Bearer abc"}}},
		{"cookie header", HTTPRequestName, obj{"url": s.URL + "/echo", "headers": obj{"Cookie": "sid=1"}}},
		{"api key header", HTTPRequestName, obj{"url": s.URL + "/echo", "headers": obj{"X-Api-Key": "k"}}},
		{"custom token header", HTTPRequestName, obj{"url": s.URL + "/echo", "headers": obj{"X-My-Token": "k"}}},
		{"secret in a header", HTTPRequestName, obj{"url": s.URL + "/echo", "headers": obj{"X-Trace": "${secret:TOKEN}"}}},
		{"secret in the url", HTTPRequestName, obj{"url": s.URL + "/echo?q=${secret:TOKEN}"}},
		{"secret in the path", HTTPRequestName, obj{"url": s.URL + "/echo/${secret:TOKEN}/x"}},
		{"key in the query", HTTPRequestName, obj{"url": s.URL + "/echo?api_key=abc"}},
		{"user info", HTTPRequestName, obj{"url": strings.Replace(s.URL, "http://", "http://u:p@", 1) + "/echo"}},
		{"user info page", FetchPageName, obj{"url": strings.Replace(s.URL, "http://", "http://u:p@", 1) + "/article"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := obs.hits.Load() + obs.misses.Load()
			for range 2 {
				res, err := call(t, w, tt.tool, "s1", tt.args)
				if err != nil {
					t.Fatal(err)
				}
				if res.Cache != nil {
					t.Errorf("a request with credentials returned a cache entry %q", res.Cache.Key)
				}
				mustNotContain(t, res.Content, "(cached response)", "(from cache)")
			}
			if after := obs.hits.Load() + obs.misses.Load(); after != before {
				t.Errorf("a request with credentials looked in the cache (%d lookups)", after-before)
			}
		})
	}
	if n := s.count("/article"); n != 2 {
		t.Errorf("page with user info: %d server hits, want 2", n)
	}

	// Other things that are never cached: non-GET methods, errors, cookies
	// set by the server, no-store answers.
	for _, tt := range []struct {
		name string
		args obj
	}{
		{"post", obj{"url": s.URL + "/echo", "method": "POST", "body": "x"}},
		{"head", obj{"url": s.URL + "/json", "method": "HEAD"}},
		{"set-cookie", obj{"url": s.URL + "/cookie"}},
		{"no-store", obj{"url": s.URL + "/no-store"}},
	} {
		res, err := call(t, w, HTTPRequestName, "s1", tt.args)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if res.Cache != nil {
			t.Errorf("%s: returned a cache entry", tt.name)
		}
	}
	for range 2 {
		if _, err := call(t, w, FetchPageName, "s1", obj{"url": s.URL + "/status/404"}); err == nil {
			t.Fatal("404 gave no error")
		}
	}
	if n := s.count("/status/404"); n != 2 {
		t.Errorf("an error page was cached: %d server hits, want 2", n)
	}
}

// N identical calls in flight at once share one execution.
func TestIdenticalCallsShareOneExecution(t *testing.T) {
	const n = 8
	tests := []struct {
		name string
		tool string
		args func(s *site) obj
		path string // counted on the server, "" for the search backend
	}{
		{"fetch_page", FetchPageName, func(s *site) obj { return obj{"url": s.URL + "/gated"} }, "/gated"},
		{"http_request", HTTPRequestName, func(s *site) obj { return obj{"url": s.URL + "/gated"} }, "/gated"},
		{"search_web", SearchWebName, func(*site) obj { return obj{"query": "gated"} }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSite(t)
			s.gate = make(chan struct{})
			backend := &fakeSearch{gate: s.gate}
			deps := testDeps(newFakeClock())
			deps.Cache = nil // sharing alone must prevent duplicate requests
			deps.Search = backend
			w, err := New(deps)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			joined := make(chan string, n)
			w.afterJoin = func(key string) { joined <- key }

			var wg sync.WaitGroup
			results := make([]string, n)
			errs := make([]error, n)
			for i := range n {
				wg.Go(func() {
					res, err := call(t, w, tt.tool, "s1", tt.args(s))
					results[i], errs[i] = res.Content, err
				})
			}
			for range n {
				<-joined // every caller joined before the one execution may end
			}
			close(s.gate)
			wg.Wait()
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("call %d: %v", i, errs[i])
				}
				if results[i] != results[0] {
					t.Errorf("call %d got another result", i)
				}
			}
			got := backend.count()
			if tt.path != "" {
				got = s.count(tt.path)
			}
			if got != 1 {
				t.Errorf("%d identical concurrent calls made %d requests, want 1", n, got)
			}
		})
	}
}

// Calls that change things are never merged.
func TestConcurrentPostsAreNotShared(t *testing.T) {
	const n = 3
	s := newSite(t)
	s.gate = make(chan struct{})
	w := newWeb(t, testDeps(newFakeClock()))
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := call(t, w, HTTPRequestName, "s1", obj{"url": s.URL + "/gated", "method": "POST", "body": "same"}); err != nil {
				t.Error(err)
			}
		})
	}
	for range n {
		<-s.arrived // all three reached the server at the same time
	}
	close(s.gate)
	wg.Wait()
	if got := s.count("/gated"); got != n {
		t.Errorf("%d POSTs made %d requests", n, got)
	}
}

// fakeSearch is a SearchBackend that counts its calls.
type fakeSearch struct {
	mu    sync.Mutex
	calls int
	gate  chan struct{}
}

func (f *fakeSearch) Search(ctx context.Context, q SearchQuery) (*SearchResponse, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &SearchResponse{Results: []SearchResult{
		{Title: "Result for " + q.Query, URL: "https://example.com/" + strconv.Itoa(len(q.Query)), Snippet: "About " + q.Query},
	}}, nil
}

func (f *fakeSearch) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// openSecrets returns a secrets store holding values, each bound to
// origins.
func openSecrets(t *testing.T, values map[string]string, origins ...string) *secrets.Store {
	t.Helper()
	t.Setenv(secrets.EnvKey, "")
	s, err := secrets.Open(cachestore.NewMemory(), t.TempDir()+"/secret.key", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range values {
		if err := s.Put(context.Background(), k, v, "", origins...); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// ctxSearch is a SearchBackend that waits for its context and reports how
// each search ended.
type ctxSearch struct {
	started chan struct{}
	ended   chan error
}

func (s *ctxSearch) Search(ctx context.Context, q SearchQuery) (*SearchResponse, error) {
	s.started <- struct{}{}
	<-ctx.Done()
	s.ended <- ctx.Err()
	return nil, ctx.Err()
}

// TestSharedExecutionEndsWhenNobodyWaits: a shared execution goes on while
// one caller still waits for it, and is cancelled when the last one gives
// up; the next caller starts a new one.
func TestSharedExecutionEndsWhenNobodyWaits(t *testing.T) {
	backend := &ctxSearch{started: make(chan struct{}, 4), ended: make(chan error, 4)}
	deps := testDeps(newFakeClock())
	deps.Cache = nil
	deps.Search = backend
	w := newWeb(t, deps)
	joined := make(chan string, 4)
	w.afterJoin = func(key string) { joined <- key }

	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	errs := make(chan error, 2)
	for _, ctx := range []context.Context{ctxA, ctxB} {
		go func() {
			_, err := callCtx(ctx, t, w, SearchWebName, "s1", obj{"query": "same"})
			errs <- err
		}()
	}
	<-joined
	<-joined
	<-backend.started
	cancelA()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up: %v", err)
	}
	w.mu.Lock()
	var waiting []int
	for _, f := range w.flights {
		waiting = append(waiting, f.waiters)
	}
	w.mu.Unlock()
	if len(waiting) != 1 || waiting[0] != 1 {
		t.Fatalf("after one of two callers gave up: executions with %v waiters, want one with 1", waiting)
	}
	cancelB()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the last caller: %v", err)
	}
	if err := <-backend.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("the execution ended with %v, want it cancelled", err)
	}
	// A new caller starts afresh.
	ctxC, cancelC := context.WithCancel(context.Background())
	go func() {
		_, err := callCtx(ctxC, t, w, SearchWebName, "s1", obj{"query": "same"})
		errs <- err
	}()
	<-joined
	<-backend.started
	cancelC()
	<-errs
	<-backend.ended
}
