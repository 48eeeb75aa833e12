package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// searxng is a SearXNG-shaped JSON endpoint.
type searxng struct {
	*httptest.Server
	mu      sync.Mutex
	queries []url.Values
}

func (s *searxng) last() url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[len(s.queries)-1]
}

func newSearXNG(t *testing.T, jsonEnabled bool) *searxng {
	t.Helper()
	s := &searxng{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		s.mu.Lock()
		s.queries = append(s.queries, q)
		s.mu.Unlock()
		if !jsonEnabled || q.Get("format") != "json" {
			http.Error(w, "Forbidden", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		var results []string
		topics := []struct{ title, content string }{
			{"Growing tomatoes: a beginner's guide", "Sun, water and soil for healthy tomato plants."},
			{"Tomato blight explained", "How to recognise and prevent late blight on tomatoes."},
			{"Best pasta sauce recipes", "Classic Italian sauces from fresh tomatoes."},
			{"Watering schedules for vegetables", "How often to water tomatoes, peppers and beans."},
			{"Tomato varieties compared", "Cherry, plum and beefsteak tomatoes side by side."},
			{"Container gardening", "Grow tomatoes on a balcony in large pots."},
			{"Companion planting", "Basil and marigolds next to tomatoes."},
			{"Harvesting and storing", "Pick tomatoes when fully coloured; never refrigerate."},
			{"Pruning side shoots", "Why cordon tomatoes need their side shoots removed."},
			{"Saving seeds", "Ferment tomato seeds before drying them."},
		}
		for i, tp := range topics {
			published := "null"
			if i == 0 {
				published = `"2026-02-01T00:00:00"`
			}
			results = append(results, fmt.Sprintf(`{"url":"https://site%d.example/page","title":%q,"content":%q,"engine":"duckduckgo","engines":["duckduckgo","brave"],"score":%d.5,"category":"general","publishedDate":%s}`,
				i, tp.title, tp.content, 10-i, published))
		}
		fmt.Fprintf(w, `{"query":%q,"number_of_results":1000,"results":[%s],
			"answers":[{"answer":"Tomatoes are fruits.","url":"https://answers.example"}],
			"corrections":[],"infoboxes":[{"infobox":"Tomato","content":"The tomato is the edible berry of Solanum lycopersicum.","urls":[]}],
			"suggestions":["tomato plant care","when to plant tomatoes"],"unresponsive_engines":[["google","timeout"]]}`,
			q.Get("q"), strings.Join(results, ","))
	}))
	t.Cleanup(s.Close)
	return s
}

func TestSearchWebWithSearXNG(t *testing.T) {
	sx := newSearXNG(t, true)
	clock := newFakeClock()
	deps := testDeps(clock)
	deps.Config.SearchURL = sx.URL // "/search" is appended
	// The search backend is trusted: it works on loopback even when the
	// tools' own policy refuses loopback.
	deps.Config.AllowLoopback = false
	w := newWeb(t, deps)

	res, err := call(t, w, SearchWebName, "s1", obj{"query": "growing tomatoes", "language": "en", "time_range": "month", "page": 2, "max_results": 5})
	if err != nil {
		t.Fatal(err)
	}
	q := sx.last()
	for k, want := range map[string]string{"q": "growing tomatoes", "format": "json", "language": "en", "time_range": "month", "pageno": "2"} {
		if got := q.Get(k); got != want {
			t.Errorf("query parameter %s = %q, want %q", k, got, want)
		}
	}
	mustContain(t, res.Content,
		`Search results for "growing tomatoes":`,
		"Answer: Tomatoes are fruits.",
		"Answer: Tomato: The tomato is the edible berry",
		"1. Growing tomatoes: a beginner's guide\n   https://site0.example/page\n   published 2026-02-01T00:00:00\n   Sun, water and soil",
		"5. Tomato varieties compared",
		"Related searches: tomato plant care; when to plant tomatoes",
	)
	mustNotContain(t, res.Content, "6. Container gardening", "filter:")

	// The same search in the session comes from the cache; the backend is
	// asked once.
	res, err = call(t, w, SearchWebName, "s1", obj{"query": "growing tomatoes", "language": "en", "time_range": "month", "page": 2, "max_results": 10})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "(from cache, searched 2026-03-01T12:00:00Z)", "10. Saving seeds")
	if n := len(sx.queries); n != 1 {
		t.Errorf("backend asked %d times", n)
	}
}

// The filter applies to search results too: with a small budget the
// results that match the query best stay, and the note says what went.
func TestSearchWebFilter(t *testing.T) {
	var passages []string
	for i := range 30 {
		topic := "gardening advice for lettuce and onions"
		if i == 17 {
			topic = "tomato blight prevention and treatment"
		}
		passages = append(passages, fmt.Sprintf("%d. Result %d\n   https://r%d.example\n   %s %s", i+1, i, i, topic, strings.Repeat("filler words here ", 20)))
	}
	f := BM25Filter{}
	res, err := f.Filter(t.Context(), FilterRequest{Tool: SearchWebName, Query: "tomato blight", Passages: passages, Budget: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Keep) != 1 || res.Keep[0] != 17 {
		t.Fatalf("kept %v, want [17]", res.Keep)
	}
	mustContain(t, res.Note, `kept the passages most relevant to "tomato blight"`, "kept 1 of 30 passages", "cut 29 (passages 1-17, 19-30)")
}

func TestSearXNGErrors(t *testing.T) {
	sx := newSearXNG(t, false)
	deps := testDeps(newFakeClock())
	deps.Config.SearchURL = sx.URL + "/search"
	w := newWeb(t, deps)
	_, err := call(t, w, SearchWebName, "s1", obj{"query": "x"})
	wantErr(t, err, "does not serve JSON", "search.formats")

	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html>not json</html>")
	}))
	defer broken.Close()
	deps.Config.SearchURL = broken.URL
	w2 := newWeb(t, deps)
	_, err = call(t, w2, SearchWebName, "s1", obj{"query": "x"})
	wantErr(t, err, "not SearXNG JSON")

	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "busy", http.StatusTooManyRequests)
	}))
	defer down.Close()
	deps.Config.SearchURL = down.URL
	w3 := newWeb(t, deps)
	_, err = call(t, w3, SearchWebName, "s1", obj{"query": "x"})
	wantErr(t, err, "HTTP 429 Too Many Requests")
}

func TestSearchEndpoint(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://127.0.0.1:8888", "http://127.0.0.1:8888/search"},
		{"http://127.0.0.1:8888/", "http://127.0.0.1:8888/search"},
		{"https://searx.example/searxng", "https://searx.example/searxng/search"},
		{"https://searx.example/search", "https://searx.example/search"},
		{"https://searx.example/search?q=x#f", "https://searx.example/search"},
	}
	for _, tt := range tests {
		u, err := searchEndpoint(tt.in)
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if u.String() != tt.want {
			t.Errorf("searchEndpoint(%s) = %s, want %s", tt.in, u, tt.want)
		}
	}
	for _, bad := range []string{"", "searx.local", "ftp://searx.example"} {
		if _, err := searchEndpoint(bad); err == nil {
			t.Errorf("searchEndpoint(%q) accepted", bad)
		}
	}
}

// panicSearch is a backend that panics.
type panicSearch struct{}

func (panicSearch) Search(context.Context, SearchQuery) (*SearchResponse, error) {
	panic("backend bug")
}

// A panic inside a shared execution becomes an error for its callers
// instead of ending the process.
func TestSharedExecutionPanicIsAnError(t *testing.T) {
	deps := testDeps(newFakeClock())
	deps.Search = panicSearch{}
	w := newWeb(t, deps)
	_, err := call(t, w, SearchWebName, "s1", obj{"query": "x"})
	wantErr(t, err, "internal error: backend bug")
}
