package service

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/space"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// ErrTokenRequired: ListenCheck refuses an address that is not loopback
// without a token.
var ErrTokenRequired = errors.New("service: listening on a non-loopback address requires a token")

// Options configures a Server. Dispatcher, Registry, Store, Broker and
// Metrics are required; the dispatcher must have been started with
// Broker.Publish as its Events and Metrics as its Observer.
type Options struct {
	Dispatcher *actors.Dispatcher
	Registry   *toolkit.Registry
	// Store is the store the dispatcher writes, seen through what the
	// service reads back: the committed sessions.
	Store   cachestore.History
	Broker  *Broker
	Metrics *Metrics
	// Token, when set, is required of every request except GET /healthz
	// and the login page, as "Authorization: Bearer <token>" or, for the
	// operator page, the cookie its login form (GET /login) sets. Without
	// a token, only requests addressed to a loopback host name are served.
	Token string
	// AllowOrigins lists the origins (scheme://host[:port]) whose pages may
	// call the API from a browser (CORS). Default: none.
	AllowOrigins []string
	// MaxBodyBytes bounds a request body. Default: what the turn limit
	// allows, actors.EncodedTurnLimit(Dispatcher.MaxTurnBytes()): the most
	// bytes of arguments a turn may carry, plus 1 MiB of envelope.
	MaxBodyBytes int64
	// MaxInFlightBytes bounds the bytes of request bodies in flight (turns
	// and client results; confirmations and answers, at most 1 MiB, are
	// never refused for it): a request is admitted while its body fits
	// beside those of the requests being read, dispatched or answered, and
	// answered 429 with Retry-After otherwise, before anything runs. A turn costs several times its body
	// in memory until it is answered (docs/PERFORMANCE.md, "Memory of turns
	// in flight"). Default twice MaxBodyBytes; at least MaxBodyBytes.
	MaxInFlightBytes int64
	// Logger receives the service's logs (never request bodies or tokens).
	// The zero value logs nothing.
	Logger zerolog.Logger
	// Replies receives answers to ask_user questions and client tool
	// results. When nil, those endpoints answer 404.
	Replies Replies

	// The operator's policy (SPEC §16): a request body may narrow it,
	// never widen it.

	// Approve is the most a turn may get (serve --approve): a body's
	// approve is lowered to it, and a body without one gets it.
	// Default: ask.
	Approve string
	// Exclude lists tools no turn may call and no tools view shows,
	// whatever a body's exclude says.
	Exclude []string
	// AutoLoadSchemas is the auto_load_schemas of bodies that do not set it.
	AutoLoadSchemas bool

	// Cluster, when set (a cluster member), names each session's owner:
	// responses to session requests carry OwnerHeader.
	Cluster Placement
	// Redirect answers a session request that another member owns with
	// 307 and the owner's address, without running it (Cluster only).
	Redirect bool

	// Logins keeps the page's login sessions (namespace LoginNamespace);
	// every server sharing it accepts the same logins. Default: Store,
	// when it is a cachestore.KVStore; required with a Token otherwise.
	Logins cachestore.KVStore
	// LoginIdle ends a login not used for this long (default
	// DefaultLoginIdle); LoginMax ends it this long after the login,
	// however used (default DefaultLoginMax), and is the cookie's Max-Age.
	LoginIdle time.Duration
	LoginMax  time.Duration

	// Space, when set, keeps the free-space reserve of the store's disk
	// (the store the dispatcher writes should be wrapped by it too): below
	// it a new turn is answered 507 before anything runs, /healthz says
	// degraded and why, and /metrics says so. Reads, event streams,
	// answers and the approvals listing are never refused for it.
	Space *space.Guard

	// TurnAnswered, when set, is told what the client of each dispatched
	// turn was answered, once it is decided: the session, the turn's
	// number (0 when it got none), the status code (of the last event, for
	// an event stream) and a summary: the statuses of the results
	// ("c1=ok c2=error") or the error the client got. It never carries
	// arguments or results. It is called on the request's goroutine and
	// must not block (chaos mode records what the client of a turn with an
	// injected storage fault saw).
	TurnAnswered func(session string, turn int64, code int, summary string)
}

// Validate names the first bad field.
func (o *Options) Validate() error {
	switch {
	case o.Dispatcher == nil:
		return errors.New("service: Options.Dispatcher is required")
	case o.Registry == nil:
		return errors.New("service: Options.Registry is required")
	case o.Store == nil:
		return errors.New("service: Options.Store is required")
	case o.Broker == nil:
		return errors.New("service: Options.Broker is required")
	case o.Metrics == nil:
		return errors.New("service: Options.Metrics is required")
	case o.MaxBodyBytes < 0:
		return errors.New("service: Options.MaxBodyBytes must not be negative")
	case o.MaxInFlightBytes < 0:
		return errors.New("service: Options.MaxInFlightBytes must not be negative")
	case o.LoginIdle < 0 || o.LoginMax < 0:
		return errors.New("service: Options.LoginIdle and LoginMax must not be negative")
	case o.Approve != "" && o.Approve != actors.ApproveAsk && o.Approve != actors.ApproveAll && o.Approve != actors.ApproveNone:
		return errors.New("service: Options.Approve must be ask, all or none")
	}
	for _, c := range o.Token {
		if c <= ' ' || c > '~' {
			return errors.New("service: Options.Token must be printable ASCII without spaces")
		}
	}
	for _, origin := range o.AllowOrigins {
		if err := checkOrigin(origin); err != nil {
			return fmt.Errorf("service: Options.AllowOrigins: %w", err)
		}
	}
	return nil
}

// checkOrigin accepts scheme://host[:port] and nothing more.
func checkOrigin(origin string) error {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%q is not an origin (scheme://host[:port])", origin)
	}
	return nil
}

// Server is the HTTP service. Its handler and its methods are safe for
// concurrent use.
type Server struct {
	// immutable after New
	opts     Options
	log      zerolog.Logger
	mux      *http.ServeMux
	handler  http.Handler
	page     *template.Template
	login    *template.Template
	tokenSum [sha256.Size]byte // of the token, compared in constant time
	logins   *logins           // with a token only
	origins  map[string]bool
	done     chan struct{} // closed by Shutdown: event streams end

	// safe for concurrent use on their own
	runs   runDecls
	budget *budget

	closingMu  sync.Mutex
	closing    bool          // guarded by closingMu
	streams    int           // guarded by closingMu: open event streams
	streamsEnd chan struct{} // guarded by closingMu: closed when streams reach 0 after Shutdown
}

// New returns a server for opts. It starts no goroutines and does not
// listen: serve Handler() with an http.Server.
func New(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Approve == "" {
		opts.Approve = actors.ApproveAsk
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = actors.EncodedTurnLimit(opts.Dispatcher.MaxTurnBytes())
	}
	if opts.MaxInFlightBytes == 0 {
		opts.MaxInFlightBytes = 2 * opts.MaxBodyBytes
	}
	if opts.MaxInFlightBytes < opts.MaxBodyBytes {
		return nil, fmt.Errorf("service: Options.MaxInFlightBytes (%d) must be at least MaxBodyBytes (%d): a turn of the largest size could never be admitted",
			opts.MaxInFlightBytes, opts.MaxBodyBytes)
	}
	s := &Server{
		opts:    opts,
		log:     opts.Logger.With().Str("component", "service").Logger(),
		done:    make(chan struct{}),
		origins: map[string]bool{},
		runs:    runDecls{Limit: maxRunDecls},
		budget: &budget{size: opts.MaxInFlightBytes, onUsed: opts.Metrics.bodyBytesInFlight,
			onRefused: opts.Metrics.overBudget.Inc},
	}
	for _, o := range opts.AllowOrigins {
		s.origins[o] = true
	}
	var err error
	if opts.Token != "" {
		s.tokenSum = sha256.Sum256([]byte(opts.Token))
		if s.logins, err = newLogins(opts, s.log); err != nil {
			return nil, err
		}
	}
	if s.page, err = parsePage("page.html"); err != nil {
		return nil, err
	}
	if s.login, err = parsePage("login.html"); err != nil {
		return nil, err
	}
	if opts.Cluster != nil {
		opts.Metrics.observeCluster(opts.Cluster)
	}
	if opts.Space != nil {
		opts.Metrics.observeSpace(opts.Space)
	}
	s.mux = s.routes()
	s.handler = s.instrument(s.secure(s.cors(s.authenticate(http.HandlerFunc(s.route)))))
	return s, nil
}

// routes registers every endpoint.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions/{session}/turns", s.owned(s.budgeted(s.handleTurn)))
	mux.HandleFunc("GET /v1/sessions/{session}/events", s.owned(s.handleSessionEvents))
	// A person's confirmation or answer is never refused for the turns in
	// flight (they may be waiting for it): small bodies, outside the budget.
	mux.HandleFunc("POST /v1/sessions/{session}/confirm/{call_id}", s.owned(s.handleConfirm))
	mux.HandleFunc("POST /v1/sessions/{session}/answer/{call_id}", s.owned(s.handleAnswer))
	mux.HandleFunc("POST /v1/sessions/{session}/client_result/{call_id}", s.owned(s.budgeted(s.handleClientResult)))
	mux.HandleFunc("DELETE /v1/sessions/{session}/runs/{run}", s.owned(s.handleEndRun))
	mux.HandleFunc("GET /v1/sessions/{session}", s.owned(s.handleSession))
	mux.HandleFunc("GET /v1/sessions", s.handleSessions)
	mux.HandleFunc("GET /v1/tools", s.handleTools)
	mux.HandleFunc("GET /v1/events", s.handleAllEvents)
	mux.HandleFunc("GET /v1/pending", s.handlePending)
	mux.HandleFunc("GET /healthz", s.handleHealth)
	mux.Handle("GET /metrics", s.opts.Metrics.Handler())
	mux.HandleFunc("GET /{$}", s.handlePage)
	mux.HandleFunc("GET "+loginPath, s.handleLoginPage)
	mux.HandleFunc("POST "+loginPath, s.handleLogin)
	mux.HandleFunc("POST "+logoutPath, s.handleLogout)
	mux.HandleFunc("GET /static/{file}", s.handleStatic)
	return mux
}

// Handler returns the service's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Shutdown makes new turn requests and event streams get 503 and ends the
// open event streams, then waits until they have ended or ctx ends. Turns
// already running go on: stop them with the dispatcher's Close, then shut
// the http.Server down, which waits for their replies. Safe to call more
// than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closingMu.Lock()
	if !s.closing {
		s.closing = true
		close(s.done)
	}
	if s.streams == 0 {
		s.closingMu.Unlock()
		return nil
	}
	if s.streamsEnd == nil {
		s.streamsEnd = make(chan struct{})
	}
	end := s.streamsEnd
	s.closingMu.Unlock()
	select {
	case <-end:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// shuttingDown reports whether Shutdown was called.
func (s *Server) shuttingDown() bool {
	s.closingMu.Lock()
	defer s.closingMu.Unlock()
	return s.closing
}

// enterStream counts an event stream in; false after Shutdown.
func (s *Server) enterStream() bool {
	s.closingMu.Lock()
	defer s.closingMu.Unlock()
	if s.closing {
		return false
	}
	s.streams++
	return true
}

// leaveStream counts an event stream out.
func (s *Server) leaveStream() {
	s.closingMu.Lock()
	defer s.closingMu.Unlock()
	s.streams--
	if s.streams == 0 && s.streamsEnd != nil {
		close(s.streamsEnd)
		s.streamsEnd = nil
	}
}

// ListenCheck refuses to serve addr (host:port) without a token unless the
// host is a loopback address or "localhost". An empty host means every
// interface.
func ListenCheck(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("service: listen address %q: %w", addr, err)
	}
	if token != "" || isLoopbackHost(host) {
		return nil
	}
	if host == "" {
		host = "every interface"
	}
	return fmt.Errorf("%w (address %s is %s, not loopback; set a token)", ErrTokenRequired, addr, host)
}

// IsLoopbackHost reports whether host names this machine's loopback
// interface: a loopback IP, "localhost" or a name under ".localhost".
func IsLoopbackHost(host string) bool { return isLoopbackHost(host) }

// isLoopbackHost reports whether host names this machine's loopback
// interface: a loopback IP, "localhost" or a name under ".localhost".
func isLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i]
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
