package web

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFetchPageExtractsArticle(t *testing.T) {
	s := newSite(t)
	w := newWeb(t, testDeps(newFakeClock()))
	res, err := call(t, w, FetchPageName, "s1", obj{"url": s.URL + "/article"})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content,
		"Title: Growing Tomatoes at Home | Garden Notes",
		"URL: "+s.URL+"/article",
		"Fetched: 2026-03-01T12:00:00Z",
		"six hours of direct sunlight",
		"Watering\nWater tomatoes deeply twice a week", // heading joined to its paragraph
		"Aphids and whitefly",
		// Links are kept, absolute, without fragments, navigation included.
		"- Home: "+s.URL+"/\n",
		"- Contact: "+s.URL+"/contact\n",
		"- soil pH guide: "+s.URL+"/guides/soil-ph\n",
		"- tomato handbook: https://books.example.org/tomatoes?ref=notes\n",
		"- Subscribe to the newsletter: "+s.URL+"/newsletter\n",
	)
	mustNotContain(t, res.Content, "do-not-show-this-script", "font-family", "Copyright 2026", "filter:", "(from cache)")
	if res.Cache != nil {
		t.Error("fetch_page handed a cache entry to the dispatcher; it writes its own")
	}
}

func TestFetchPageOtherContent(t *testing.T) {
	s := newSite(t)
	w := newWeb(t, testDeps(newFakeClock()))
	tests := []struct {
		name, path string
		want       []string
		err        []string
	}{
		{name: "json", path: "/json", want: []string{`{"name":"tooldispatch","stars":42`}},
		{name: "plain text", path: "/text", want: []string{"line one\n\nline two"}},
		{name: "binary", path: "/binary", err: []string{"image/png, not a text page", "download_file"}},
		{name: "not found", path: "/status/404", err: []string{"HTTP 404 Not Found", "nothing at this URL", `"error":"status 404"`}},
		{name: "unauthorized", path: "/status/401", err: []string{"HTTP 401 Unauthorized", "http_request", "store_secret"}},
		{name: "forbidden", path: "/status/403", err: []string{"HTTP 403 Forbidden", "${secret:NAME}"}},
		{name: "server error", path: "/status/500", err: []string{"HTTP 500 Internal Server Error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := call(t, w, FetchPageName, "s1", obj{"url": s.URL + tt.path})
			if tt.err != nil {
				wantErr(t, err, tt.err...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			mustContain(t, res.Content, tt.want...)
		})
	}
}

func TestFetchPageBadArguments(t *testing.T) {
	w := newWeb(t, testDeps(newFakeClock()))
	tests := []struct {
		url  string
		want string
	}{
		{"", "url is empty"},
		{"example.com/page", "no scheme and host"},
		{"https://api.example.com/?key=${secret:KEY}", "does not resolve ${secret:…}"},
		{"http://%zz", "not a valid URL"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			_, err := call(t, w, FetchPageName, "s1", obj{"url": tt.url})
			wantErr(t, err, tt.want)
		})
	}
}

// The filter runs on every return, fresh or cached, with that call's query.
func TestFetchPageFilter(t *testing.T) {
	s := newSite(t)
	w := newWeb(t, testDeps(newFakeClock()))

	res, err := call(t, w, FetchPageName, "s1", obj{"url": s.URL + "/article", "query": "watering roots", "max_chars": 1000})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "Water tomatoes deeply", "filter: kept the passages most relevant to \"watering roots\"", "cut ")
	mustNotContain(t, res.Content, "marigolds planted nearby")

	// From the cache, another query keeps other passages.
	res, err = call(t, w, FetchPageName, "s2", obj{"url": s.URL + "/article", "query": "aphids whitefly pests", "max_chars": 1000})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "(from cache)", "marigolds planted nearby", "filter: kept the passages most relevant")
	mustNotContain(t, res.Content, "irregular watering makes the fruit crack")
	if n := s.count("/article"); n != 1 {
		t.Errorf("server hits = %d, want 1", n)
	}

	// A replaced filter decides what the model gets.
	calls := 0
	deps := testDeps(newFakeClock())
	deps.Filter = FilterFunc(func(_ context.Context, req FilterRequest) (FilterResult, error) {
		calls++
		if req.Tool != FetchPageName || req.Query != "q" || req.Budget != 12000 {
			t.Errorf("filter request %+v", req)
		}
		return FilterResult{Keep: []int{len(req.Passages) - 1, 99, -1}, Note: "custom cut"}, nil
	})
	w2 := newWeb(t, deps)
	res, err = call(t, w2, FetchPageName, "s1", obj{"url": s.URL + "/article", "query": "q"})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "tomato handbook", "[custom cut]")
	mustNotContain(t, res.Content, "six hours")
	if calls != 1 {
		t.Errorf("filter called %d times", calls)
	}

	// A failing filter falls back to the first passages.
	deps.Filter = FilterFunc(func(context.Context, FilterRequest) (FilterResult, error) {
		return FilterResult{}, errors.New("model unavailable")
	})
	w3 := newWeb(t, deps)
	res, err = call(t, w3, FetchPageName, "s1", obj{"url": s.URL + "/article", "max_chars": 1000})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "six hours", "the result filter failed; kept the first passages")
}

func TestSplitPassages(t *testing.T) {
	long := strings.Repeat("This sentence is part of a long paragraph. ", 40)
	tests := []struct {
		name  string
		in    string
		plain bool
		want  []string
	}{
		{name: "paragraphs", in: "First paragraph.\n\nSecond paragraph.\n", want: []string{"First paragraph.", "Second paragraph."}},
		{name: "heading joined", in: "Intro.\n\nSoil\n\nUse compost.\n\nTail", want: []string{"Intro.", "Soil\nUse compost.", "Tail"}},
		{name: "blank lines with spaces", in: "a.\n  \n\t\nb.", want: []string{"a.", "b."}},
		{name: "indentation kept", in: "def f():\n    return 1\n", want: []string{"def f():\n    return 1"}},
		{name: "CRLF", in: "one.\r\n\r\ntwo.", want: []string{"one.", "two."}},
		{name: "plain text has no headings", in: "Soil\n\nUse compost.", plain: true, want: []string{"Soil", "Use compost."}},
	}
	split := func(text string, headings bool) []string {
		t.Helper()
		parts, err := splitPassages(t.Context(), text, headings)
		if err != nil {
			t.Fatal(err)
		}
		return parts
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, split(tt.in, !tt.plain)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	parts := split(long, true)
	if len(parts) < 2 {
		t.Fatalf("a %d-character paragraph gave %d passages", len(long), len(parts))
	}
	for _, p := range parts {
		if runeLen(p) > maxPassage {
			t.Errorf("passage of %d characters", runeLen(p))
		}
		if !strings.HasSuffix(p, ".") {
			t.Errorf("passage not cut at a sentence end: %q", p[len(p)-20:])
		}
	}
	if got, _ := chunk(t.Context(), strings.Repeat("x", 2000), 800); len(got) != 3 || runeLen(got[0]) != 800 {
		t.Errorf("a 2000-character word gave %d pieces", len(got))
	}
	// A cut that would land inside a redaction marker lands before it.
	word := strings.Repeat("x", 795) + "[secret:TOKEN]" + strings.Repeat("y", 900)
	if got, _ := chunk(t.Context(), word, 800); len(got) != 3 || got[0] != strings.Repeat("x", 795) || !strings.HasPrefix(got[1], "[secret:TOKEN]y") {
		t.Errorf("a marker at a cut: %d pieces, %.20q…", len(got), got)
	}
	// The work stops when its context ends.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := splitPassages(ctx, strings.Repeat("a line\n", checkEvery), true); !errors.Is(err, context.Canceled) {
		t.Errorf("splitting with an ended context: %v", err)
	}
}

func TestCanonicalURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"HTTP://Example.COM", "http://example.com/"},
		{"https://example.com:443/a?b=2&a=1#frag", "https://example.com/a?a=1&b=2"},
		{"http://example.com:8080/x", "http://example.com:8080/x"},
		{"http://user:pw@example.com/", "http://example.com/"},
		{"http://[::1]:80/", "http://[::1]/"},
		{"http://[2001:db8::1]:8080/", "http://[2001:db8::1]:8080/"},
		{"http://example.com/a%2Fb", "http://example.com/a%2Fb"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := canonicalURL(u); got != tt.want {
			t.Errorf("canonicalURL(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
