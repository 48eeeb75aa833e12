package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

// Budgets of fetch_page, in characters of page text.
const (
	defaultPageBudget = 12_000
	minBudget         = 1_000
	maxPageBudget     = 100_000
	// linkChars caps the characters of the link list.
	linkChars = 6_000
	// excerptChars is how much of an error page's text an error of
	// fetch_page quotes; http_request quotes more of an API's answer.
	excerptChars    = 300
	apiExcerptChars = 2000
)

const fetchPageSchema = `{
  "type": "object",
  "properties": {
    "url": {"type": "string", "minLength": 1, "maxLength": 8192, "description": "The http(s) URL of the page."},
    "query": {"type": "string", "maxLength": 500, "description": "What you are looking for on the page; when the page is long, the passages most relevant to it are kept."},
    "max_chars": {"type": "integer", "minimum": 1000, "maximum": 100000, "description": "Most characters of page text to return (default 12000)."}
  },
  "required": ["url"],
  "additionalProperties": false
}`

func (w *Web) fetchPageTool() toolkit.Tool {
	return toolkit.Tool{
		Name: FetchPageName,
		Description: "Fetch a web page (GET) and return its readable text, title and links; menus, ads and scripts are " +
			"left out. Pass query to keep the passages most relevant to what you look for when the page is long. " +
			"Results are cached for 30 minutes. For APIs, other methods or headers, use http_request.",
		Schema:     json.RawMessage(fetchPageSchema),
		Concurrent: true,
		ReadOnly:   true,
		Timeout:    w.policy.Timeout + toolGrace,
		Handler:    w.fetchPage,
	}
}

// pageFormat is the version of the cached page; entries of another
// version are fetched again.
const pageFormat = 2

// page is a fetched page as it is cached: everything extracted (and
// redacted), before it is split into passages and filtered.
type page struct {
	Format      int    `json:"v"`
	URL         string `json:"url"` // after redirects
	Status      int    `json:"status"`
	Title       string `json:"title,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	// Text is the readable text. It is split into passages when it is
	// shown, after it is redacted with the secrets known then, so that no
	// split cuts a secret stored after the page was cached.
	Text      string    `json:"text"`
	Headings  bool      `json:"headings,omitempty"` // see extracted.Headings
	Links     []link    `json:"links,omitempty"`
	MoreLinks int       `json:"more_links,omitempty"`
	Truncated bool      `json:"truncated,omitempty"`
	Fetched   time.Time `json:"fetched"`
}

// fetchPageKey is the cache key of a page, shared across sessions.
func fetchPageKey(u *url.URL) string { return FetchPageName + "|" + canonicalURL(u) }

func (w *Web) fetchPage(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	rawURL := strings.TrimSpace(c.Args.String("url"))
	if secrets.HasReference(rawURL) {
		return toolkit.Result{}, errors.New("fetch_page does not resolve ${secret:…} references; use http_request for requests that need a credential")
	}
	u, err := w.parseURL(rawURL)
	if err != nil {
		return toolkit.Result{}, err
	}
	query := strings.TrimSpace(c.Args.String("query"))
	budget := int(min(max(c.Args.Int("max_chars", defaultPageBudget), minBudget), maxPageBudget))

	// Credentials in the URL keep a page out of the shared cache.
	cacheable := u.User == nil
	key := fetchPageKey(u)
	r := w.redactorFor(c)
	var p *page
	var cachedBytes []byte // the cached bytes p was decoded from
	cached := false
	if cacheable {
		if b, ok := w.cacheGet(ctx, FetchPageName, key); ok {
			p, cachedBytes, cached = pages.decode(key, b), b, true
		}
	}
	if p == nil {
		cached = false
		load := func(ctx context.Context) (any, error) {
			if cacheable {
				if b, ok := w.cachePeek(ctx, key); ok {
					if p := decodePage(b); p != nil {
						return p, nil
					}
				}
			}
			p, err := w.loadPage(ctx, u)
			if err == nil && cacheable {
				w.cachePut(ctx, FetchPageName, key, p, p.Fetched)
			}
			return p, err
		}
		var v any
		if cacheable {
			v, err = w.share(ctx, key, w.policy.Timeout+toolGrace, load)
		} else {
			v, err = load(ctx)
		}
		if err != nil {
			return toolkit.Result{}, err
		}
		p = v.(*page)
	}
	if !cached {
		cachedBytes = nil
	}
	passages, err := pages.passages(ctx, key, cachedBytes, p, r)
	if err != nil {
		return toolkit.Result{}, err
	}
	return toolkit.Result{Content: w.renderPage(ctx, p, passages, u, query, budget, cached)}, nil
}

// pageMemo keeps the decoded form of the pages read from the cache most
// recently, by cache key together with the exact cached bytes: a hit whose
// bytes equal the remembered ones skips the JSON decode (the larger part of
// a cached fetch_page after the filter). The store stays the source of
// truth: every hit still reads it, and different bytes decode afresh.
type pageMemo struct {
	mu    sync.Mutex
	byKey map[string]memoPage // guarded by mu
	order []string            // guarded by mu; oldest first
}

type memoPage struct {
	raw string
	p   *page // never modified once decoded
	// passages are p's, split after redaction by the redactor of version
	// version (see passages); nil until then.
	passages []string
	version  uint64
}

// versioned is a Redactor that tells its set of secrets apart
// (secrets.Redactor does): equal versions redact alike.
type versioned interface {
	Version() uint64
}

// passages returns p's passages: its text redacted whole by r, then split.
// For a cached page (raw is the cached bytes) the memo keeps them while r's
// set of secrets stays the same.
func (m *pageMemo) passages(ctx context.Context, key string, raw []byte, p *page, r Redactor) ([]string, error) {
	var version uint64
	vr, memo := r.(versioned)
	if r == nil {
		memo = true
	} else if memo {
		version = vr.Version()
	}
	memo = memo && raw != nil && len(raw) <= pageMemoMaxBytes
	if memo {
		m.mu.Lock()
		e, ok := m.byKey[key]
		m.mu.Unlock()
		if ok && e.passages != nil && e.version == version && e.raw == string(raw) {
			return e.passages, nil
		}
	}
	out, err := splitPassages(ctx, redact(r, p.Text), p.Headings)
	if err != nil || !memo {
		return out, err
	}
	if out == nil {
		out = []string{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.byKey[key]; ok && e.raw == string(raw) {
		e.passages, e.version = out, version
		m.byKey[key] = e
	}
	return out, nil
}

const (
	pageMemoEntries  = 32
	pageMemoMaxBytes = 1 << 20 // larger pages are not remembered
)

var pages = &pageMemo{byKey: map[string]memoPage{}}

func (m *pageMemo) decode(key string, b []byte) *page {
	m.mu.Lock()
	e, ok := m.byKey[key]
	m.mu.Unlock()
	if ok && e.raw == string(b) {
		return e.p.clone()
	}
	p := decodePage(b)
	if p == nil || len(b) > pageMemoMaxBytes {
		return p
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byKey[key]; !ok {
		if len(m.order) >= pageMemoEntries {
			delete(m.byKey, m.order[0])
			m.order = m.order[1:]
		}
		m.order = append(m.order, key)
	}
	m.byKey[key] = memoPage{raw: string(b), p: p.clone()}
	return p
}

// clone copies the slices a caller could change; strings are immutable.
func (p *page) clone() *page {
	c := *p
	c.Links = slices.Clone(p.Links)
	return &c
}

func decodePage(b []byte) *page {
	var p page
	if err := json.Unmarshal(b, &p); err != nil || p.Format != pageFormat {
		return nil
	}
	return &p
}

// loadPage fetches and extracts a page.
func (w *Web) loadPage(ctx context.Context, u *url.URL) (*page, error) {
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("url %q: %v", u.Redacted(), err)
	}
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5")
	resp, err := w.fetch(ctx, req, w.policy.MaxBytes)
	if err != nil {
		return nil, err
	}
	if resp.Status >= 400 {
		return nil, statusError(ctx, resp, "fetch_page sends no credentials: call http_request with a header that "+
			"references a stored secret (${secret:NAME}; the user stores one with store_secret)", excerptChars, w.redactor)
	}
	ct := resp.Header.Get("Content-Type")
	ex, err := extract(ctx, resp.Body, ct, resp.URL, w.redactor, resp.Truncated)
	if err != nil {
		return nil, err
	}
	return &page{
		Format:      pageFormat,
		URL:         resp.URL.String(),
		Status:      resp.Status,
		Title:       ex.Title,
		ContentType: mediaType(ct, resp.Body),
		Text:        ex.Text,
		Headings:    ex.Headings,
		Links:       ex.Links,
		MoreLinks:   ex.MoreLinks,
		Truncated:   resp.Truncated,
		Fetched:     w.now(),
	}, nil
}

// statusError describes an error response, quoting its start redacted by
// red; credHint is added for 401 and 403.
func statusError(ctx context.Context, r *response, credHint string, excerpt int, red Redactor) error {
	var b strings.Builder
	b.WriteString(statusLine(r.Status))
	switch r.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		b.WriteString(": the server wants a credential or rejected the one sent; " + credHint)
	case http.StatusNotFound:
		b.WriteString(": there is nothing at this URL")
	case http.StatusTooManyRequests:
		b.WriteString(": too many requests")
		if ra := r.Header.Get("Retry-After"); ra != "" {
			b.WriteString("; the server asks to retry after " + ra)
		}
	}
	if ex := errorExcerpt(ctx, r, excerpt, red); ex != "" {
		b.WriteString("\nresponse: " + ex)
	}
	return errors.New(b.String())
}

// errorExcerpt returns the start of an error response's text, at most n
// characters, redacted by red before it is cut. Only the first
// excerptInput bytes of the body are read for it.
func errorExcerpt(ctx context.Context, r *response, n int, red Redactor) string {
	ct := r.Header.Get("Content-Type")
	mt := mediaType(ct, r.Body)
	body, more := r.Body, r.Truncated
	if len(body) > excerptInput {
		body, more = body[:excerptInput], true
	}
	var text string
	switch {
	case isHTML(mt):
		if ex, err := extractHTML(ctx, body, ct, r.URL, red, more); err == nil {
			text = ex.Text
			if strings.TrimSpace(text) == "" {
				text = ex.Title
			}
		}
	case isText(mt):
		text = redactText(red, string(decodeText(body, ct)), more)
	}
	return clipRunes(collapse(text), n)
}

// parseURL parses a URL the model gave and checks it against the policy;
// the URL it returns has its host in the one form that is dialled.
func (w *Web) parseURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("url is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("url %q is not a valid URL", raw)
	}
	if u.Scheme == "" && u.Host == "" {
		return nil, fmt.Errorf("url %q has no scheme and host; write it in full, e.g. https://%s", raw, strings.TrimPrefix(raw, "//"))
	}
	return w.policy.Target(u)
}

// canonicalURL is the form of a URL used in cache keys: scheme and host in
// lower case, no default port, no fragment, no user information, "/" for
// an empty path, query parameters sorted by name.
func canonicalURL(u *url.URL) string {
	c := *u
	c.Scheme = strings.ToLower(c.Scheme)
	host := strings.ToLower(c.Hostname())
	if port := c.Port(); port != "" && !(c.Scheme == "http" && port == "80") && !(c.Scheme == "https" && port == "443") {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	c.Host = host
	c.User = nil
	c.Fragment, c.RawFragment = "", ""
	if c.Path == "" {
		c.Path, c.RawPath = "/", ""
	}
	if c.RawQuery != "" {
		if q, err := url.ParseQuery(c.RawQuery); err == nil {
			c.RawQuery = q.Encode()
		}
	}
	c.ForceQuery = false
	return c.String()
}

// renderPage writes a page for the model: header lines, the passages the
// filter keeps, its note, and the links.
func (w *Web) renderPage(ctx context.Context, p *page, passages []string, requested *url.URL, query string, budget int, cached bool) string {
	keep, note := w.runFilter(ctx, FetchPageName, query, passages, budget)
	// One allocation for the whole text: header, kept passages, note, links.
	size := 512 + len(p.Title) + 2*len(p.URL) + len(note)
	if len(p.Links) > 0 {
		size += linkChars + 64
	}
	for _, k := range keep {
		size += len(passages[k]) + 2
	}
	var b strings.Builder
	b.Grow(size)
	if p.Title != "" {
		fmt.Fprintf(&b, "Title: %s\n", p.Title)
	}
	fmt.Fprintf(&b, "URL: %s\n", p.URL)
	if final, err := url.Parse(p.URL); err == nil && canonicalURL(final) != canonicalURL(requested) {
		fmt.Fprintf(&b, "Redirected from: %s\n", requested.Redacted())
	}
	fmt.Fprintf(&b, "Fetched: %s", p.Fetched.UTC().Format(time.RFC3339))
	if cached {
		b.WriteString(" (from cache)")
	}
	b.WriteString("\n")
	if p.Truncated {
		fmt.Fprintf(&b, "Note: the page is larger than %s; only its start was read.\n", toolkit.HumanSize(w.policy.MaxBytes))
	}
	b.WriteString("\n")

	switch {
	case len(passages) == 0:
		b.WriteString("(the page has no readable text)\n")
	case len(keep) == 0:
		b.WriteString("(no passage was kept)\n")
	}
	for i, k := range keep {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(passages[k])
	}
	if len(keep) > 0 {
		b.WriteString("\n")
	}
	if note != "" {
		fmt.Fprintf(&b, "\n[%s]\n", note)
	}
	writeLinks(&b, p.Links, p.MoreLinks)
	return b.String()
}

// writeLinks lists links within linkChars characters.
func writeLinks(b *strings.Builder, links []link, more int) {
	if len(links) == 0 {
		return
	}
	fmt.Fprintf(b, "\nLinks (%d):\n", len(links)+more)
	used := 0
	for i, l := range links {
		line := "- " + l.URL + "\n"
		if l.Text != "" {
			line = "- " + l.Text + ": " + l.URL + "\n"
		}
		if used+len(line) > linkChars {
			more += len(links) - i
			break
		}
		used += len(line)
		b.WriteString(line)
	}
	if more > 0 {
		fmt.Fprintf(b, "(%d more links not shown)\n", more)
	}
}
