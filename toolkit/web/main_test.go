package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// regexp2's match-timeout clock stops itself ~1 s after the last match.
		goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock"))
}

// articleHTML is a real-looking page: navigation, an article of several
// sections, a sidebar, a footer and links.
const articleHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Growing Tomatoes at Home | Garden Notes</title>
<style>body { font-family: serif; }</style>
<script>var tracking = "do-not-show-this-script";</script>
</head>
<body>
<header>
  <nav class="menu">
    <a href="/">Home</a> <a href="/about">About us</a> <a href="/contact#form">Contact</a>
    <a href="https://social.example.com/gardennotes">Follow us</a>
  </nav>
</header>
<main>
<article>
  <h1>Growing Tomatoes at Home</h1>
  <p class="byline">By Ada Gardener</p>
  <p>Tomatoes need at least six hours of direct sunlight every day to produce a good crop. Choose the sunniest
  spot of the garden, away from trees and walls that cast shade in the afternoon.</p>
  <h2>Watering</h2>
  <p>Water tomatoes deeply twice a week rather than a little every day. Shallow watering leads to weak roots,
  and irregular watering makes the fruit crack. Water the soil, not the leaves, early in the morning.</p>
  <h2>Soil and feeding</h2>
  <p>Use well-drained soil rich in compost. A pH between 6.2 and 6.8 suits them best; see the
  <a href="/guides/soil-ph">soil pH guide</a> for how to measure it. Feed every two weeks once the first fruit sets.</p>
  <h2>Pruning</h2>
  <p>Pinch out the side shoots that grow between the main stem and the branches of cordon varieties. Bush varieties
  need no pruning at all; let them sprawl and support the heaviest trusses.</p>
  <h2>Pests</h2>
  <p>Aphids and whitefly are the usual pests. A strong jet of water removes aphids, and marigolds planted nearby
  keep whitefly away. Blight shows as brown patches on the leaves in wet summers.</p>
  <p>Read more in our <a href="https://books.example.org/tomatoes?ref=notes">tomato handbook</a>.</p>
</article>
</main>
<aside><a href="/newsletter">Subscribe to the newsletter</a></aside>
<footer><p>Copyright 2026 Garden Notes. All rights reserved.</p></footer>
</body>
</html>`

// site is a loopback test server with counted paths.
type site struct {
	*httptest.Server
	t    *testing.T
	mu   sync.Mutex
	hits map[string]int
	// gate, when set, blocks /gated until it is closed.
	gate chan struct{}
	// arrived receives a value each time /gated is entered.
	arrived chan struct{}
	// stop is closed when the test ends, releasing slow handlers.
	stop chan struct{}
	// lastHeaders are the request headers /echo saw last.
	lastHeaders http.Header
}

func (s *site) hit(path string) {
	s.mu.Lock()
	s.hits[path]++
	s.mu.Unlock()
}

// count returns how often path was requested.
func (s *site) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func (s *site) headers() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastHeaders.Clone()
}

func newSite(t *testing.T) *site {
	t.Helper()
	s := &site{t: t, hits: map[string]int{}, stop: make(chan struct{}), arrived: make(chan struct{}, 64)}
	mux := http.NewServeMux()
	mux.HandleFunc("/article", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, articleHTML)
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"name":"tooldispatch","stars":42,"tags":["agents","tools"]}`)
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "line one\n\nline two\n")
	})
	mux.HandleFunc("/redirect/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n <= 0 {
			http.Redirect(w, r, "/article", http.StatusFound)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/redirect/%d", n-1), http.StatusFound)
	})
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("url"), http.StatusFound)
	})
	echo := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.lastHeaders = r.Header.Clone()
		s.mu.Unlock()
		names := make([]string, 0, len(r.Header))
		for k := range r.Header {
			names = append(names, k)
		}
		sort.Strings(names)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "%s %s\n", r.Method, r.URL.RequestURI())
		for _, k := range names {
			fmt.Fprintf(w, "%s: %s\n", k, strings.Join(r.Header[k], ", "))
		}
		fmt.Fprintf(w, "\n%s", body)
	}
	mux.HandleFunc("/echo", echo)
	mux.HandleFunc("/echo/", echo)
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":"status %d","auth":%q}`, code, r.Header.Get("Authorization"))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		line := strings.Repeat("x", 1023) + "\n"
		for range 2048 { // 2 MiB, sent in chunks
			if _, err := io.WriteString(w, line); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/huge-declared", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(2<<20))
		w.Write(make([]byte, 2<<20))
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"))
	})
	mux.HandleFunc("/cookie", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "abc"})
		io.WriteString(w, "hello")
	})
	mux.HandleFunc("/no-store", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, "fresh every time")
	})
	mux.HandleFunc("/gated", func(w http.ResponseWriter, r *http.Request) {
		s.arrived <- struct{}{}
		if s.gate != nil {
			select {
			case <-s.gate:
			case <-s.stop:
			}
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, articleHTML)
	})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hit(r.URL.Path)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(s.stop)
		s.Close()
	})
	return s
}

// fakeClock is a settable clock; safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// cacheObserver counts cache lookups by tool.
type cacheObserver struct {
	toolkit.NopObserver
	hits, misses atomic.Int64
}

func (o *cacheObserver) Cache(_ string, hit bool) {
	if hit {
		o.hits.Add(1)
	} else {
		o.misses.Add(1)
	}
}

// testDeps are deps for tests: loopback allowed, short timeouts, a memory
// cache and a fake clock.
func testDeps(clock *fakeClock) Deps {
	return Deps{
		Config: Config{AllowLoopback: true, Timeout: 5 * time.Second},
		Cache:  CacheFromStore(cachestore.NewMemory()),
		Clock:  clock.Now,
	}
}

// newWeb builds the tools and closes them when the test ends.
func newWeb(t *testing.T, deps Deps) *Web {
	t.Helper()
	w, err := New(deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(w.Close)
	return w
}

// tool returns the tool name of w.
func tool(t *testing.T, w *Web, name string) toolkit.Tool {
	t.Helper()
	for _, tl := range w.Tools() {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %s", name)
	return toolkit.Tool{}
}

// call runs a tool in a session with JSON arguments.
func call(t *testing.T, w *Web, name, session string, args any) (toolkit.Result, error) {
	t.Helper()
	return callCtx(context.Background(), t, w, name, session, args)
}

func callCtx(ctx context.Context, t *testing.T, w *Web, name, session string, args any) (toolkit.Result, error) {
	t.Helper()
	a := objArgs(t, args)
	tl := tool(t, w, name)
	return tl.Handler(ctx, &toolkit.Call{Session: session, Run: "r1", ID: "c1", Name: name, Args: a, Emit: func(string) {}})
}

// objArgs parses test arguments given as a value to marshal.
func objArgs(t *testing.T, args any) toolkit.Args {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	a, err := toolkit.ParseArgs(string(raw), toolkit.DefaultLimits)
	if err != nil {
		t.Fatalf("bad test arguments %s: %v", raw, err)
	}
	return a
}

// obj is shorthand for tool arguments.
type obj = map[string]any

// mustContain fails unless s holds every part.
func mustContain(t *testing.T, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("missing %q in:\n%s", p, s)
		}
	}
}

// mustNotContain fails if s holds any part.
func mustNotContain(t *testing.T, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if strings.Contains(s, p) {
			t.Errorf("unexpected %q in:\n%s", p, s)
		}
	}
}

// wantErr fails unless err holds every part.
func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error containing %q, got none", parts)
	}
	mustContain(t, err.Error(), parts...)
}
