package service

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Owner routing in a cluster: every member takes every session request
// and, when another member owns the session, forwards it over the cluster
// (one round trip between members). To let a client or load balancer stop
// paying that hop, each response to a session request names the owner.
const (
	// OwnerHeader names the service address (Placement's URL) of the
	// member that owns the request's session, on every response to a
	// /v1/sessions/{session}/… request of a cluster member that knows it.
	OwnerHeader = "Tooldispatch-Owner"
	// RedirectedParam marks a request that a member redirected to the
	// owner (Options.Redirect). A member never redirects such a request
	// again: it serves it, forwarding it over the cluster if the owner
	// changed in between, so a redirect loop cannot happen.
	RedirectedParam = "redirected"
)

// ownerTimeout bounds asking the placement for an owner's address while
// answering a request.
const ownerTimeout = 2 * time.Second

// Placement tells where a session lives in a cluster (a cluster member, see
// actors/cluster.Member). Its methods are called concurrently.
type Placement interface {
	// Owner returns the service address of the member owning session
	// ("" when unknown) and whether that member is this one.
	Owner(ctx context.Context, session string) (url string, self bool)
	// Forwarded counts the requests this member forwarded to another
	// member owning their session.
	Forwarded() uint64
}

// Successor is implemented by a Placement that tells where a session will
// live once this member has left the cluster: a member that shuts down
// names that member to the turns it refuses (503, or 307 in redirect
// mode).
type Successor interface {
	Successor(ctx context.Context, session string) (url string)
}

// refuseShuttingDown answers a turn that arrives while the service shuts
// down: 503, naming the session's next owner in a cluster (OwnerHeader),
// or in redirect mode 307 to it.
func (s *Server) refuseShuttingDown(w http.ResponseWriter, r *http.Request) {
	e := errShuttingDown()
	if succ, ok := s.opts.Cluster.(Successor); ok {
		ctx, cancel := context.WithTimeout(r.Context(), ownerTimeout)
		url := succ.Successor(ctx, r.PathValue("session"))
		cancel()
		if url != "" {
			w.Header().Set(OwnerHeader, url)
			if s.opts.Redirect && s.mayRedirect(r) {
				s.opts.Metrics.redirects.Inc()
				q := r.URL.Query()
				q.Set(RedirectedParam, "1")
				w.Header().Set("Location", strings.TrimSuffix(url, "/")+r.URL.EscapedPath()+"?"+q.Encode())
				w.Header().Set("Cache-Control", "no-store")
				w.WriteHeader(http.StatusTemporaryRedirect)
				return
			}
			e = errorf(http.StatusServiceUnavailable, "this member is shutting down; the session's next owner is %s", url)
			e.retryAfter = drainRetryAfter
		}
	}
	writeError(w, e)
}

// owned wraps a handler of a /v1/sessions/{session}/… route: the response
// names the session's owner (OwnerHeader) as the placement has it when the
// response starts (a turn that waited for the cluster to move its session
// names the new owner), and, with Options.Redirect, a request for a session
// another member owns is answered 307 to the owner without running it.
func (s *Server) owned(h http.HandlerFunc) http.HandlerFunc {
	if s.opts.Cluster == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		session := r.PathValue("session")
		if s.opts.Redirect && s.mayRedirect(r) {
			ctx, cancel := context.WithTimeout(r.Context(), ownerTimeout)
			url, self := s.opts.Cluster.Owner(ctx, session)
			cancel()
			if !self && url != "" {
				s.opts.Metrics.redirects.Inc()
				q := r.URL.Query()
				q.Set(RedirectedParam, "1")
				w.Header().Set(OwnerHeader, url)
				w.Header().Set("Location", strings.TrimSuffix(url, "/")+r.URL.EscapedPath()+"?"+q.Encode())
				w.Header().Set("Cache-Control", "no-store")
				w.WriteHeader(http.StatusTemporaryRedirect)
				return
			}
		}
		h(&ownerWriter{ResponseWriter: w, r: r, session: session, p: s.opts.Cluster}, r)
	}
}

// ownerWriter sets OwnerHeader when the response starts.
type ownerWriter struct {
	http.ResponseWriter
	r       *http.Request
	session string
	p       Placement
	started bool
}

func (w *ownerWriter) start() {
	if w.started {
		return
	}
	w.started = true
	if w.Header().Get(OwnerHeader) != "" {
		return // named already (the next owner of a member shutting down)
	}
	ctx, cancel := context.WithTimeout(w.r.Context(), ownerTimeout)
	defer cancel()
	if url, _ := w.p.Owner(ctx, w.session); url != "" {
		w.Header().Set(OwnerHeader, url)
	}
}

func (w *ownerWriter) WriteHeader(code int) {
	w.start()
	w.ResponseWriter.WriteHeader(code)
}

func (w *ownerWriter) Write(b []byte) (int, error) {
	w.start()
	return w.ResponseWriter.Write(b)
}

// Flush passes a flush through (event streams).
func (w *ownerWriter) Flush() {
	w.start()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *ownerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// mayRedirect reports whether r may be redirected to another member: not
// when a member already redirected it, and not when a browser sent it (the
// operator page: its cookie belongs to this member's address, and a fetch
// across origins would need CORS on the owner).
func (s *Server) mayRedirect(r *http.Request) bool {
	if r.URL.Query().Has(RedirectedParam) {
		return false
	}
	if r.Header.Get("Sec-Fetch-Mode") != "" || r.Header.Get("Origin") != "" {
		return false
	}
	if _, err := r.Cookie(tokenCookie); err == nil {
		return false
	}
	return true
}

// observeCluster adds the cluster's counters to the metrics. A registry
// shared by two servers keeps the first.
func (m *Metrics) observeCluster(p Placement) {
	_ = m.reg.Register(m.redirects)
	_ = m.reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "tooldispatch_cluster_forwarded_total",
		Help: "Session requests this member forwarded to the member owning the session (a round trip between members each).",
	}, func() float64 { return float64(p.Forwarded()) }))
}
