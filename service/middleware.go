package service

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Security settings of responses.
const (
	// contentSecurityPolicy lets the operator page load only its own
	// script, style and event stream.
	contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	// tokenCookie holds a login's random id (never the token, nothing
	// derived from it) once the login form was posted with the token.
	tokenCookie = "tooldispatch_session"
	// preflightMaxAge is how long a browser may cache an allowed preflight.
	preflightMaxAge = "600"
)

// securityHeaders are set on every response. Their value slices are
// shared by all responses, which saves an allocation per header and
// request: net/http only reads them, and Header.Set and Add replace or
// grow a slice rather than write into it (cap 1).
var securityHeaders = []struct {
	key   string
	value []string
}{
	{"X-Content-Type-Options", []string{"nosniff"}},
	{"Referrer-Policy", []string{"no-referrer"}},
	{"Content-Security-Policy", []string{contentSecurityPolicy}},
	{"X-Frame-Options", []string{"DENY"}},
}

// instrument counts every request by route pattern and status code.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		route := "unmatched"
		if _, pattern := s.mux.Handler(r); pattern != "" {
			route = pattern
		}
		took := time.Since(began)
		s.opts.Metrics.observeHTTP(route, sw.status(), took)
		// The route, never the URL: a query may carry anything a client
		// put in it, a token included.
		s.log.Debug().Str("method", r.Method).Str("route", route).Int("code", sw.status()).Dur("took", took).Msg("request")
	})
}

// secure sets the security headers of every response and, when the server
// has no token, refuses requests addressed to a host name that is not
// loopback (a web page that rebinds its own name to 127.0.0.1 must not
// reach the API).
func (s *Server) secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for _, sh := range securityHeaders {
			h[sh.key] = sh.value
		}
		if s.opts.Token == "" {
			host := r.Host
			if hh, _, err := net.SplitHostPort(host); err == nil {
				host = hh
			}
			if !isLoopbackHost(host) {
				writeError(w, errorf(http.StatusForbidden, "this server has no token and answers only requests addressed to a loopback host"))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// cors answers cross-origin requests: an origin in AllowOrigins gets the
// CORS headers; any other gets none, and its preflight is refused.
func (s *Server) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		allowed := s.origins[origin]
		if preflight {
			if !allowed {
				writeError(w, errorf(http.StatusForbidden, "cross-origin requests from %s are not allowed", messages.ClipText(origin, 200)))
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, Last-Event-ID")
			h.Set("Access-Control-Max-Age", preflightMaxAge)
			h.Add("Vary", "Origin")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if allowed {
			w.Header().Set("Access-Control-Allow-Origin", origin)
			// An allowed page may read what the service says in headers.
			w.Header().Set("Access-Control-Expose-Headers", ApproveLoweredHeader+", "+OwnerHeader)
			w.Header().Add("Vary", "Origin")
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate requires the token, when there is one, of every request but
// the health check, the login and logout pages and the login's style
// sheet. A request with an Authorization header is judged by its bearer
// token alone; any other needs the cookie of a live login and must come
// from the page itself (pageRequest), on every route, reads included. A
// browser that opens the operator page without both is sent to the login
// page (login.go); an API request gets 401 (no login) or 403 (a cookie
// sent by anything but the page).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Token == "" || public(r) {
			next.ServeHTTP(w, r)
			return
		}
		if auth := r.Header.Get("Authorization"); auth != "" {
			if !s.bearerAuthorized(auth) {
				refuseUnauthorized(w)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		page := r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead)
		_, err := r.Cookie(tokenCookie)
		switch {
		case err == nil && !pageRequest(r) && !page:
			writeError(w, errorf(http.StatusForbidden, "a request signed in with the page's cookie must come from the page itself "+
				"(Sec-Fetch-Site: same-origin, or this service's Origin); programs send Authorization: Bearer <token>"))
		case err != nil || !pageRequest(r) || !s.cookieAuthorized(r):
			if page {
				toLogin(w)
				return
			}
			refuseUnauthorized(w)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// refuseUnauthorized answers a request without a valid token or login.
func refuseUnauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="tooldispatch"`)
	writeError(w, errorf(http.StatusUnauthorized, "missing or wrong token: send Authorization: Bearer <token> (a browser signs in at the page's login)"))
}

// public reports whether r may be served without the token: the health
// check, the login page and the style sheet it uses, and the logout.
func public(r *http.Request) bool {
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch r.URL.Path {
	case "/healthz", "/static/page.css":
		return read
	case loginPath:
		return read || r.Method == http.MethodPost
	case logoutPath:
		return r.Method == http.MethodPost
	}
	return false
}

// authorized reports whether r would pass authenticate: its bearer token,
// or a live login's cookie on a request of the page itself.
func (s *Server) authorized(r *http.Request) bool {
	if auth := r.Header.Get("Authorization"); auth != "" {
		return s.bearerAuthorized(auth)
	}
	return pageRequest(r) && s.cookieAuthorized(r)
}

// bearerAuthorized checks an Authorization header's bearer token.
func (s *Server) bearerAuthorized(auth string) bool {
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return s.tokenMatches(strings.TrimSpace(tok))
}

// tokenMatches compares a presented token with the server's in constant
// time (hashing both first, so not even the length leaks).
func (s *Server) tokenMatches(tok string) bool {
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1
}

// route serves the request through the mux, answering in JSON when no
// route matches (404) or the method is not one the route has (405).
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	rec := &headerRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	switch {
	case rec.code == http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		writeError(w, errorf(http.StatusMethodNotAllowed, "method %s is not allowed here (allowed: %s)", r.Method, rec.header.Get("Allow")))
	case rec.code >= 300 && rec.code < 400:
		http.Redirect(w, r, rec.header.Get("Location"), rec.code)
	default:
		writeError(w, errorf(http.StatusNotFound, "no such endpoint: %s %s", r.Method, messages.ClipText(r.URL.Path, 200)))
	}
}

// statusWriter records the status code of a response. It passes Flush
// through and unwraps for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush() // fails only when the client went away
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// headerRecorder catches what the mux's own not-found, not-allowed and
// redirect handlers would write.
type headerRecorder struct {
	header http.Header
	code   int
}

func (r *headerRecorder) Header() http.Header { return r.header }

func (r *headerRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return len(b), nil
}

func (r *headerRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
