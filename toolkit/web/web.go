package web

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

// Tool names.
const (
	FetchPageName     = "fetch_page"
	SearchWebName     = "search_web"
	HTTPRequestName   = "http_request"
	DownloadFileName  = "download_file"
	PublicAPIListName = "public_api_list"
)

// CacheTTL is how long a cached GET result lives, from its first write.
const CacheTTL = 30 * time.Minute

// toolGrace is added to a request's timeout to make a tool's timeout, so
// that the policy's own timeout, with its clearer message, ends the call.
const toolGrace = 15 * time.Second

// apiListTimeout is public_api_list's timeout.
const apiListTimeout = 10 * time.Second

// Redactor takes secret values out of a text, whole or arriving in pieces
// (secrets.Redactor is one).
type Redactor = toolkit.Redactor

// Deps is what the web tools need from the embedding program. The zero
// value gives fetch_page, http_request and public_api_list on the default
// policy, without a cache and without secrets.
type Deps struct {
	// Config is the operator's configuration: policy, search backend, APIs.
	Config Config
	// Cache holds the 30-minute result cache (see CacheFromStore). Nil: no
	// caching; identical concurrent calls still share one execution.
	Cache toolkit.Cache
	// Secrets resolves ${secret:NAME} in http_request and download_file.
	// Nil: references fail with `secret "NAME" not found`.
	Secrets *secrets.Store
	// Redactor removes secret values from every result and error of the
	// web tools, before anything is cut (a body at max_chars, a page into
	// passages, a snippet, an error's excerpt). Nil: Secrets.Redactor()
	// when Secrets is set, else the call's (toolkit.Call.Redactor).
	Redactor Redactor
	// Filter decides what of a fetch_page or search_web result the model
	// gets. Nil: BM25Filter{}.
	Filter Filter
	// Search is search_web's backend. Nil: a SearXNG client for
	// Config.SearchURL; with neither, search_web is not registered.
	Search SearchBackend
	// Clock gives the time for cache expiry. Nil: time.Now.
	Clock func() time.Time
	// Workspace is where download_file saves files. Nil: download_file is
	// not registered.
	Workspace *builtin.Workspace
	// Observer receives cache hits and misses. Nil: toolkit.NopObserver.
	Observer toolkit.Observer
	// Logger receives debug records of requests (host, status, size; never
	// secret values). The zero value logs nothing.
	Logger zerolog.Logger
}

// Web is the set of web tools built from Deps. Its handlers are safe for
// concurrent use. Close it when done: it waits for shared executions that
// outlived their callers.
type Web struct {
	// immutable after New
	cfg      Config
	policy   Policy
	client   *http.Client
	cache    toolkit.Cache
	secrets  *secrets.Store
	redactor Redactor
	filter   Filter
	search   SearchBackend
	now      func() time.Time
	ws       *builtin.Workspace
	obs      toolkit.Observer
	log      zerolog.Logger
	base     context.Context    // parent of shared executions; canceled by Close
	cancel   context.CancelFunc // cancels base
	// afterJoin, when set (tests), is called with the key once a caller has
	// joined a shared execution.
	afterJoin func(key string)

	mu      sync.Mutex
	closed  bool               // guarded by mu
	flights map[string]*flight // guarded by mu; shared executions by key
	wg      sync.WaitGroup     // shared executions; Add under mu while open
}

// flight is one shared execution and the callers waiting for it.
type flight struct {
	done    chan struct{} // closed when val and err are set
	val     any
	err     error
	cancel  context.CancelFunc // ends the execution's context
	waiters int                // guarded by Web.mu
}

// New checks deps and builds the tools. It starts no goroutine.
func New(deps Deps) (*Web, error) {
	if err := deps.Config.Validate(); err != nil {
		return nil, err
	}
	cfg := deps.Config.withDefaults()
	policy := deps.Config.Policy()
	if err := policy.Validate(); err != nil {
		return nil, err
	}
	w := &Web{
		cfg:      cfg,
		policy:   policy,
		client:   policy.NewClient(),
		cache:    deps.Cache,
		secrets:  deps.Secrets,
		redactor: deps.Redactor,
		filter:   deps.Filter,
		search:   deps.Search,
		now:      deps.Clock,
		ws:       deps.Workspace,
		obs:      deps.Observer,
		log:      deps.Logger.With().Str("component", "web").Logger(),
	}
	if w.secrets != nil {
		// The operator named the API and its credential together: its
		// secret may go to the API's origins.
		for _, a := range cfg.APIs {
			origins, _ := a.secretOrigins() // checked by Validate
			for _, name := range a.secretNames() {
				if err := w.secrets.Bind(name, origins...); err != nil {
					return nil, fmt.Errorf("web: api %q: %w", a.Name, err)
				}
			}
		}
	}
	if w.redactor == nil && w.secrets != nil {
		w.redactor = w.secrets.Redactor()
	}
	if w.filter == nil {
		w.filter = BM25Filter{}
	}
	if w.now == nil {
		w.now = time.Now
	}
	if w.obs == nil {
		w.obs = toolkit.NopObserver{}
	}
	if w.search == nil && cfg.SearchURL != "" {
		s, err := NewSearXNG(cfg.SearchURL, policy)
		if err != nil {
			return nil, err
		}
		w.search = s
	}
	w.base, w.cancel = context.WithCancel(context.Background())
	w.flights = map[string]*flight{}
	return w, nil
}

// Tools returns the web tools, in name order: fetch_page, http_request and
// public_api_list always; search_web with a search backend; download_file
// with a workspace.
func (w *Web) Tools() []toolkit.Tool {
	tools := []toolkit.Tool{w.fetchPageTool(), w.httpRequestTool(), w.publicAPIListTool()}
	if w.search != nil {
		tools = append(tools, w.searchWebTool())
	}
	if w.ws != nil {
		tools = append(tools, w.downloadFileTool())
	}
	slices.SortFunc(tools, func(a, b toolkit.Tool) int { return cmp.Compare(a.Name, b.Name) })
	return tools
}

// Register builds the web tools for deps and adds them to reg; it panics
// when deps are invalid (a start-up mistake), like Registry.Register. Close
// the returned Web when done.
func Register(reg *toolkit.Registry, deps Deps) *Web {
	w, err := New(deps)
	if err != nil {
		panic(err)
	}
	for _, t := range w.Tools() {
		reg.Register(t)
	}
	return w
}

// Close cancels shared executions still running and waits for them. Calls
// after Close fail with ErrClosed.
func (w *Web) Close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
}

// share runs fn once for every caller that asks for key while it runs, and
// returns its result to each. fn runs on a goroutine of its own with a
// context derived from the Web's and bounded by timeout, so that one caller
// giving up does not fail the others; each caller stops waiting when its
// own ctx ends, and when the last one has stopped waiting, fn's context is
// cancelled (its work ends with the calls that wanted it) and the next
// caller starts afresh.
func (w *Web) share(ctx context.Context, key string, timeout time.Duration, fn func(context.Context) (any, error)) (any, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, ErrClosed
	}
	f := w.flights[key]
	if f == nil {
		fctx, cancel := context.WithTimeout(w.base, timeout)
		f = &flight{done: make(chan struct{}), cancel: cancel}
		w.flights[key] = f
		w.wg.Add(1)
		go w.fly(fctx, key, f, fn)
	}
	f.waiters++
	w.mu.Unlock()
	if w.afterJoin != nil {
		w.afterJoin(key)
	}
	select {
	case <-f.done:
		w.leave(key, f, false)
		return f.val, f.err
	case <-ctx.Done():
		w.leave(key, f, true)
		return nil, ctx.Err()
	}
}

// fly runs a shared execution and hands its result to the waiting callers.
func (w *Web) fly(ctx context.Context, key string, f *flight, fn func(context.Context) (any, error)) {
	defer w.wg.Done()
	defer f.cancel()
	defer func() {
		// A panic becomes an error for every caller instead of ending
		// the process.
		if r := recover(); r != nil {
			f.val, f.err = nil, fmt.Errorf("internal error: %v", r)
		}
		w.mu.Lock()
		if w.flights[key] == f {
			delete(w.flights, key)
		}
		w.mu.Unlock()
		close(f.done)
	}()
	f.val, f.err = fn(ctx)
}

// leave stops a caller's wait for f; the last caller to stop before f is
// done cancels it.
func (w *Web) leave(key string, f *flight, early bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f.waiters--
	if early && f.waiters == 0 {
		if w.flights[key] == f {
			delete(w.flights, key)
		}
		f.cancel()
	}
}

// cacheGet looks key up in the cache and reports the lookup to the
// observer. A failing cache counts as a miss.
func (w *Web) cacheGet(ctx context.Context, tool, key string) ([]byte, bool) {
	if w.cache == nil {
		return nil, false
	}
	v, ok, err := w.cache.Get(ctx, key, w.now())
	if err != nil {
		w.log.Warn().Err(err).Str("tool", tool).Msg("reading the result cache")
		ok = false
	}
	w.obs.Cache(tool, ok)
	return v, ok
}

// cachePeek looks key up without counting it (a shared execution checking
// whether an earlier one stored the result meanwhile).
func (w *Web) cachePeek(ctx context.Context, key string) ([]byte, bool) {
	if w.cache == nil {
		return nil, false
	}
	v, ok, err := w.cache.Get(ctx, key, w.now())
	return v, ok && err == nil
}

// cachePut stores a fresh result with an expiry CacheTTL after fetched.
func (w *Web) cachePut(ctx context.Context, tool, key string, v any, fetched time.Time) {
	if w.cache == nil {
		return
	}
	b, err := json.Marshal(v)
	if err == nil {
		err = w.cache.Put(ctx, toolkit.CacheEntry{Key: key, Value: b, Expires: fetched.Add(CacheTTL)})
	}
	if err != nil {
		w.log.Warn().Err(err).Str("tool", tool).Msg("writing the result cache")
	}
}

// redactorFor returns the redactor of a call's results: the Web's, else
// the call's; nil when neither has one.
func (w *Web) redactorFor(c *toolkit.Call) Redactor {
	if w.redactor != nil || c == nil {
		return w.redactor
	}
	return c.Redactor
}

// redact applies r, if any, to s.
func redact(r Redactor, s string) string {
	if r == nil {
		return s
	}
	return r.Redact(s)
}

// redactText redacts text, whole, or, when more followed it that was
// never read, as the head of a longer text (toolkit.RedactHead).
func redactText(r Redactor, text string, more bool) string {
	if more {
		return toolkit.RedactHead(r, text)
	}
	return redact(r, text)
}

// runFilter applies the filter to passages and returns the indices to show
// (in order, within budget) and the note.
func (w *Web) runFilter(ctx context.Context, tool, query string, passages []string, budget int) ([]int, string) {
	res, err := w.filter.Filter(ctx, FilterRequest{Tool: tool, Query: query, Passages: passages, Budget: budget})
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr == nil {
			w.log.Warn().Err(err).Str("tool", tool).Msg("result filter failed; keeping the first passages")
		}
		keep := HeadWithin(passages, budget)
		return keep, cutNote(FilterRequest{Tool: tool, Query: query, Passages: passages, Budget: budget},
			keep, nil, totalLen(passages), "the result filter failed; kept the first passages")
	}
	keep := slices.Clone(res.Keep)
	slices.Sort(keep)
	keep = slices.Compact(keep)
	out := keep[:0]
	used := 0
	dropped := 0
	for _, i := range keep {
		if i < 0 || i >= len(passages) {
			continue
		}
		if n := runeLen(passages[i]); used+n <= budget {
			out = append(out, i)
			used += n
		} else {
			dropped++
		}
	}
	note := res.Note
	if dropped > 0 {
		note = strings.TrimSpace(note + fmt.Sprintf(" %d more passages the filter kept did not fit the budget of %d characters.", dropped, budget))
	}
	return out, note
}

func totalLen(passages []string) int {
	n := 0
	for _, p := range passages {
		n += runeLen(p)
	}
	return n
}

// errorsIsAny reports whether err matches any of targets.
func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
