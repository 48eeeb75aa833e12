package service

import (
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The login of the operator page on a server with a token: a form that
// posts the token in its body and gets the page's cookie, which names a
// login session (logins.go). The token never goes in a URL (which browsers
// keep in their history and proxies in their access logs); only the page
// itself may post the form, and only the page's own requests may use the
// cookie (pageRequest): a copied cookie is not a bearer token.
const (
	// loginPath is the login page, relative to the service's root.
	loginPath = "/login"
	// logoutPath ends the login of the cookie it is posted with.
	logoutPath = "/logout"
	// maxLoginBytes bounds the login form.
	maxLoginBytes = 4 << 10
	// loginCSP lets the login page load its style sheet and post its form
	// to the server, and nothing else.
	loginCSP = "default-src 'none'; script-src 'none'; style-src 'self'; base-uri 'none'; " +
		"form-action 'self'; frame-ancestors 'none'"
	// wrongToken is what the login page says after a wrong token.
	wrongToken = "That is not this server's token."
)

// loginData is what login.html renders.
type loginData struct {
	Error string
}

// handleLoginPage serves GET /login: the form, or, for a server without a
// token or a browser that has the cookie, the operator page.
func (s *Server) handleLoginPage(w http.ResponseWriter, r *http.Request) {
	if s.opts.Token == "" || (pageRequest(r) && s.cookieAuthorized(r)) {
		toPage(w)
		return
	}
	s.writeLogin(w, http.StatusOK, "")
}

// handleLogin serves POST /login: a form whose token field holds the
// server's token gets the page's cookie and goes to the page. Only the
// form's body is read, never the query; a post from another site is
// refused.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	if s.opts.Token == "" {
		toPage(w)
		return
	}
	if !sameOrigin(r) {
		writeError(w, errorf(http.StatusForbidden, "the login form may be posted only from this server's own login page"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBytes)
	if err := r.ParseForm(); err != nil {
		s.writeLogin(w, http.StatusBadRequest, "The form could not be read; send the token field of this page.")
		return
	}
	if !s.tokenMatches(r.PostForm.Get("token")) {
		s.writeLogin(w, http.StatusUnauthorized, wrongToken)
		return
	}
	id, err := s.logins.create(r.Context())
	if err != nil {
		s.log.Error().Err(err).Msg("making a login")
		writeError(w, errorf(http.StatusServiceUnavailable, "the login could not be recorded; try again"))
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: tokenCookie, Value: id, Path: "/", MaxAge: int(s.logins.max / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	toPage(w)
}

// handleLogout serves POST /logout: the login of the cookie it carries
// ends (no other), the cookie is cleared, and the browser goes to the
// login page. A post from another site is refused.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		writeError(w, errorf(http.StatusForbidden, "the logout may be posted only from this server's own page"))
		return
	}
	if c, err := r.Cookie(tokenCookie); err == nil && s.logins != nil {
		s.logins.end(r.Context(), c.Value)
	}
	http.SetCookie(w, &http.Cookie{
		Name: tokenCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	toLogin(w)
}

// toPage sends the browser to the operator page. The Location is relative,
// so the page also works mounted under a prefix (http.StripPrefix): the
// browser resolves it against the address it asked for.
func toPage(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", "./")
	w.WriteHeader(http.StatusSeeOther)
}

// toLogin sends a browser that opened the page without the cookie to the
// login page.
func toLogin(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", strings.TrimPrefix(loginPath, "/"))
	w.WriteHeader(http.StatusSeeOther)
}

// writeLogin renders the login page with a message, if any.
func (s *Server) writeLogin(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Set("Content-Security-Policy", loginCSP)
	if code == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="tooldispatch"`)
	}
	s.writeHTML(w, s.login, loginData{Error: msg}, code)
}

// cookieAuthorized reports whether r carries the cookie of a live login.
func (s *Server) cookieAuthorized(r *http.Request) bool {
	c, err := r.Cookie(tokenCookie)
	if err != nil || s.logins == nil {
		return false
	}
	return s.logins.valid(r.Context(), c.Value)
}

// pageRequest reports whether a browser sent r from a page of this
// service, as every request the operator page makes does: Sec-Fetch-Site
// says same-origin or, where the browser sends no Sec-Fetch-Site, Origin
// is the service's own (the scheme and host r reached). A request with
// neither, or from another port of the same host (same-site), is not the
// page's, whatever cookie it carries.
func pageRequest(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	origin := r.Header.Get("Origin")
	return origin != "" && strings.EqualFold(origin, ownOrigin(r))
}

// ownOrigin is the origin r was sent to: the scheme and host it reached.
func ownOrigin(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// sameOrigin reports whether a browser sent r from a page of this server:
// Sec-Fetch-Site says so when the browser sends it; otherwise the Origin
// header, when present, must name the host r was sent to. A request with
// neither does not come from a web page (browsers send Origin with every
// POST), so no other site can have caused it.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}
