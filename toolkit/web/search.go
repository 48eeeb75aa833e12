package web

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Limits of search_web.
const (
	defaultSearchResults = 8
	maxSearchResults     = 20
	defaultSearchBudget  = 8_000
	maxSnippet           = 500
)

// SearchQuery is one search.
type SearchQuery struct {
	Query     string
	Language  string // e.g. "en", "de-CH"; empty: the backend's default
	TimeRange string // "", "day", "week", "month" or "year"
	Page      int    // from 1
}

// SearchResult is one hit.
type SearchResult struct {
	Title     string `json:"title"`
	URL       string `json:"url"`
	Snippet   string `json:"snippet,omitempty"`
	Engine    string `json:"engine,omitempty"`
	Published string `json:"published,omitempty"`
}

// SearchResponse is what a backend found.
type SearchResponse struct {
	Results     []SearchResult `json:"results"`
	Answers     []string       `json:"answers,omitempty"`
	Suggestions []string       `json:"suggestions,omitempty"`
	// Unresponsive names engines that failed (rate limits, timeouts).
	Unresponsive []string `json:"unresponsive,omitempty"`
}

// SearchBackend runs web searches for search_web. Implementations must be
// safe for concurrent use and honour ctx.
type SearchBackend interface {
	Search(ctx context.Context, q SearchQuery) (*SearchResponse, error)
}

// SearXNG is a SearchBackend that asks a SearXNG instance for JSON
// results (GET /search?q=…&format=json). The instance is configured by the
// operator and trusted: it may be on a loopback or private address; the
// other limits of the policy (timeout, size cap, redirects) apply.
type SearXNG struct {
	// immutable after NewSearXNG
	endpoint *url.URL
	client   *http.Client
	policy   Policy
}

// NewSearXNG returns a client of the SearXNG instance at baseURL (its root,
// or its /search endpoint).
func NewSearXNG(baseURL string, p Policy) (*SearXNG, error) {
	u, err := searchEndpoint(baseURL)
	if err != nil {
		return nil, fmt.Errorf("web: search_url: %w", err)
	}
	p.AllowLoopback, p.AllowPrivate = true, true
	return &SearXNG{endpoint: u, client: p.NewClient(), policy: p}, nil
}

// searxngResponse is the part of SearXNG's JSON output that is used.
type searxngResponse struct {
	Results []struct {
		Title         string   `json:"title"`
		URL           string   `json:"url"`
		Content       string   `json:"content"`
		Engine        string   `json:"engine"`
		Engines       []string `json:"engines"`
		PublishedDate *string  `json:"publishedDate"`
	} `json:"results"`
	Answers []json.RawMessage `json:"answers"`
	// Infoboxes carry a summary of the main entity, if any.
	Infoboxes []struct {
		Infobox string `json:"infobox"`
		Content string `json:"content"`
	} `json:"infoboxes"`
	Suggestions         []string          `json:"suggestions"`
	UnresponsiveEngines []json.RawMessage `json:"unresponsive_engines"`
}

// Search implements SearchBackend.
func (s *SearXNG) Search(ctx context.Context, q SearchQuery) (*SearchResponse, error) {
	u := *s.endpoint
	params := url.Values{"q": {q.Query}, "format": {"json"}}
	if q.Language != "" {
		params.Set("language", q.Language)
	}
	if q.TimeRange != "" {
		params.Set("time_range", q.TimeRange)
	}
	if q.Page > 1 {
		params.Set("pageno", strconv.Itoa(q.Page))
	}
	u.RawQuery = params.Encode()
	rctx, cancel := context.WithTimeout(ctx, s.policy.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", s.policy.UserAgent)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the search backend: %w", requestError(ctx, err, s.policy.Timeout))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode == http.StatusForbidden {
			// SearXNG answers 403 when the json format is not enabled.
			return nil, errors.New("the search backend does not serve JSON: enable the json format in SearXNG's settings.yml (search.formats)")
		}
		return nil, fmt.Errorf("the search backend answered %s", statusLine(resp.StatusCode))
	}
	var raw searxngResponse
	dec := json.NewDecoder(io.LimitReader(resp.Body, s.policy.MaxBytes))
	if err := dec.Decode(&raw); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if rctx.Err() != nil {
			return nil, fmt.Errorf("the search backend timed out after %s", s.policy.Timeout)
		}
		return nil, fmt.Errorf("the search backend's answer is not SearXNG JSON: %v", err)
	}
	out := &SearchResponse{Suggestions: raw.Suggestions}
	for _, r := range raw.Results {
		if r.URL == "" {
			continue
		}
		// Snippets are cut when shown, after they are redacted.
		sr := SearchResult{Title: collapse(r.Title), URL: r.URL, Snippet: collapse(r.Content), Engine: r.Engine}
		if sr.Engine == "" && len(r.Engines) > 0 {
			sr.Engine = strings.Join(r.Engines, ", ")
		}
		if r.PublishedDate != nil {
			sr.Published = *r.PublishedDate
		}
		out.Results = append(out.Results, sr)
	}
	for _, a := range raw.Answers {
		// Older versions send strings, newer ones objects with "answer".
		var text string
		if json.Unmarshal(a, &text) != nil {
			var obj struct {
				Answer string `json:"answer"`
			}
			_ = json.Unmarshal(a, &obj)
			text = obj.Answer
		}
		if text = collapse(text); text != "" {
			out.Answers = append(out.Answers, text)
		}
	}
	for _, ib := range raw.Infoboxes {
		if c := collapse(ib.Content); c != "" {
			out.Answers = append(out.Answers, collapse(ib.Infobox+": "+c))
		}
	}
	for _, e := range raw.UnresponsiveEngines {
		// [name, reason] pairs.
		var pair []string
		if json.Unmarshal(e, &pair) == nil && len(pair) > 0 {
			out.Unresponsive = append(out.Unresponsive, strings.Join(pair, ": "))
		}
	}
	return out, nil
}

const searchWebSchema = `{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": 500, "description": "What to search the web for."},
    "max_results": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Most results to return (default 8)."},
    "language": {"type": "string", "maxLength": 20, "description": "Language of the results, e.g. \"en\" or \"de-CH\" (default: any)."},
    "time_range": {"type": "string", "enum": ["day", "week", "month", "year"], "description": "Only results from this recent period."},
    "page": {"type": "integer", "minimum": 1, "maximum": 10, "description": "Page of results (default 1)."}
  },
  "required": ["query"],
  "additionalProperties": false
}`

func (w *Web) searchWebTool() toolkit.Tool {
	return toolkit.Tool{
		Name: SearchWebName,
		Description: "Search the web. Returns titles, URLs and snippets, most relevant first; read a result with fetch_page. " +
			"Results are cached for 30 minutes in this session.",
		Schema:     json.RawMessage(searchWebSchema),
		Concurrent: true,
		ReadOnly:   true,
		Timeout:    w.policy.Timeout + toolGrace,
		Handler:    w.searchWeb,
	}
}

// searchKey is the cache key of a search: per session, by the search's
// parameters.
func searchKey(session string, q SearchQuery) string {
	params, _ := json.Marshal(struct {
		Q    string `json:"q"`
		Lang string `json:"lang,omitempty"`
		Time string `json:"time,omitempty"`
		Page int    `json:"page,omitempty"`
	}{q.Query, q.Language, q.TimeRange, q.Page})
	return SearchWebName + "|" + strconv.Quote(session) + "|" + string(params)
}

// searchEntry is a search as it is cached.
type searchEntry struct {
	Response *SearchResponse `json:"response"`
	Fetched  time.Time       `json:"fetched"`
}

func (w *Web) searchWeb(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	q := SearchQuery{
		Query:     collapse(c.Args.String("query")),
		Language:  strings.TrimSpace(c.Args.String("language")),
		TimeRange: c.Args.String("time_range"),
		Page:      int(max(c.Args.Int("page", 1), 1)),
	}
	if q.Query == "" {
		return toolkit.Result{}, errors.New("query is empty: say what to search for")
	}
	limit := int(min(max(c.Args.Int("max_results", defaultSearchResults), 1), maxSearchResults))
	key := searchKey(c.Session, q)

	var entry *searchEntry
	cached := false
	if b, ok := w.cacheGet(ctx, SearchWebName, key); ok {
		entry, cached = decodeSearch(b), true
	}
	if entry == nil {
		cached = false
		v, err := w.share(ctx, key, w.policy.Timeout+toolGrace, func(ctx context.Context) (any, error) {
			if b, ok := w.cachePeek(ctx, key); ok {
				if e := decodeSearch(b); e != nil {
					return e, nil
				}
			}
			resp, err := w.search.Search(ctx, q)
			if err != nil {
				return nil, err
			}
			e := &searchEntry{Response: resp, Fetched: w.now()}
			w.cachePut(ctx, SearchWebName, key, e, e.Fetched)
			return e, nil
		})
		if err != nil {
			return toolkit.Result{}, err
		}
		entry = v.(*searchEntry)
	}
	return toolkit.Result{Content: w.renderSearch(ctx, q, entry, limit, cached, w.redactorFor(c))}, nil
}

func decodeSearch(b []byte) *searchEntry {
	var e searchEntry
	if err := json.Unmarshal(b, &e); err != nil || e.Response == nil {
		return nil
	}
	return &e
}

// renderSearch writes a search for the model; the results go through the
// filter with the search query. Answers and snippets are redacted by r,
// then cut at maxSnippet characters.
func (w *Web) renderSearch(ctx context.Context, q SearchQuery, e *searchEntry, limit int, cached bool, red Redactor) string {
	results := e.Response.Results
	if len(results) > limit {
		results = results[:limit]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Search results for %q", q.Query)
	if cached {
		fmt.Fprintf(&b, " (from cache, searched %s)", e.Fetched.UTC().Format(time.RFC3339))
	}
	b.WriteString(":\n")
	for _, a := range e.Response.Answers {
		fmt.Fprintf(&b, "Answer: %s\n", clipRunes(redact(red, a), maxSnippet))
	}
	if len(results) == 0 {
		b.WriteString("No results.")
		if len(e.Response.Unresponsive) > 0 {
			fmt.Fprintf(&b, " Engines that failed: %s.", strings.Join(e.Response.Unresponsive, "; "))
		}
		b.WriteString("\n")
	}
	passages := make([]string, len(results))
	for i, r := range results {
		var p strings.Builder
		fmt.Fprintf(&p, "%d. %s\n   %s", i+1, cmp.Or(r.Title, "(no title)"), r.URL)
		if r.Published != "" {
			fmt.Fprintf(&p, "\n   published %s", r.Published)
		}
		if r.Snippet != "" {
			fmt.Fprintf(&p, "\n   %s", clipRunes(redact(red, r.Snippet), maxSnippet))
		}
		passages[i] = p.String()
	}
	keep, note := w.runFilter(ctx, SearchWebName, q.Query, passages, defaultSearchBudget)
	for _, k := range keep {
		b.WriteString("\n")
		b.WriteString(passages[k])
		b.WriteString("\n")
	}
	if note != "" {
		fmt.Fprintf(&b, "\n[%s]\n", note)
	}
	if len(e.Response.Suggestions) > 0 {
		fmt.Fprintf(&b, "\nRelated searches: %s\n", strings.Join(e.Response.Suggestions, "; "))
	}
	return b.String()
}
