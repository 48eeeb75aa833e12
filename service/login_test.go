package service

import (
	"bytes"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// noRedirects returns f's client that does not follow redirects.
func (f *fixture) noRedirects() *http.Client {
	c := *f.client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// postLogin posts the login form with token, and header.
func (f *fixture) postLogin(t *testing.T, path, token string, header http.Header) *http.Response {
	t.Helper()
	form := url.Values{"token": {token}}.Encode()
	req, err := http.NewRequestWithContext(t.Context(), "POST", f.url+path, strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := f.noRedirects().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestLoginPage: a browser that opens a token server's page without the
// cookie is sent to a login page (not a JSON 401); the form posts the token
// in the body and gets the page's cookie; the token never goes in a URL.
func TestLoginPage(t *testing.T) {
	f := newFixture(t, fixtureOpts{token: testToken})
	f.token = "" // credentials by hand
	nr := f.noRedirects()

	resp, err := nr.Get(f.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "login" {
		t.Fatalf("GET / without the cookie: %d Location %q, want 303 to the login page", resp.StatusCode, resp.Header.Get("Location"))
	}

	resp, body := f.request(t.Context(), "GET", "/login", nil, nil)
	page := string(body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /login: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{`<form method="post" action="login"`, `type="password" name="token"`, `static/page.css`} {
		if !strings.Contains(page, want) {
			t.Errorf("the login page lacks %s:\n%s", want, page)
		}
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"form-action 'self'", "script-src 'none'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("login page Content-Security-Policy %q lacks %s", csp, want)
		}
	}
	if resp, _ := f.request(t.Context(), "GET", "/static/page.css", nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("the login page's style sheet: %d", resp.StatusCode)
	}
	if resp, _ := f.request(t.Context(), "GET", "/static/page.js", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the page's script without the cookie: %d, want 401", resp.StatusCode)
	}

	// A wrong token: the page again, with a message, and no cookie.
	resp = f.postLogin(t, "/login", "wrong", http.Header{"Origin": {f.hs.URL}})
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 || !strings.Contains(b.String(), "not this server") {
		t.Errorf("login with a wrong token: %d cookies %v\n%s", resp.StatusCode, resp.Cookies(), b.String())
	}

	// The right token: the cookie and back to the page.
	resp = f.postLogin(t, "/login", testToken, http.Header{"Origin": {f.hs.URL}, "Sec-Fetch-Site": {"same-origin"}})
	resp.Body.Close()
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "./" {
		t.Fatalf("login: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if len(cookies) != 1 || cookies[0].Name != tokenCookie || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode ||
		cookies[0].Path != "/" || cookies[0].Secure != overTLS || cookies[0].Value == testToken || strings.Contains(cookies[0].Value, testToken) {
		t.Fatalf("login cookie %+v: want HttpOnly, SameSite=Strict, Path=/, Secure over TLS and only then (TLS: %v), never the token", cookies, overTLS)
	}
	if strings.Contains(resp.Header.Get("Location"), testToken) {
		t.Error("the redirect carries the token")
	}
	h := f.pageHeaders()
	h.Set("Cookie", cookies[0].String())
	resp, body = f.request(t.Context(), "GET", "/", nil, h)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `id="pending"`) {
		t.Errorf("the page with the cookie: %d", resp.StatusCode)
	}
	if cookies[0].MaxAge != int(DefaultLoginMax/time.Second) {
		t.Errorf("the cookie's Max-Age is %d, want the login's absolute lifetime %v", cookies[0].MaxAge, DefaultLoginMax)
	}
}

// TestLoginAttacks: the token only ever travels in a POST body from the
// page itself. A token in the address logs nobody in (it would stay in
// the history and in access logs); a login or a cookie-authenticated
// request from another site is refused; over TLS the cookie is Secure; the
// service's request log never carries the token.
func TestLoginAttacks(t *testing.T) {
	var logs bytes.Buffer
	f := newFixture(t, fixtureOpts{token: testToken, logger: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	f.token = ""
	nr := f.noRedirects()

	t.Run("token in the address", func(t *testing.T) {
		for _, path := range []string{"/?token=" + testToken, "/login?token=" + testToken} {
			resp, err := nr.Get(f.url + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if len(resp.Cookies()) != 0 {
				t.Errorf("GET %s set %v: a token in a URL must not log in", path, resp.Cookies())
			}
		}
		resp := f.postLogin(t, "/login?token="+testToken, "", http.Header{"Origin": {f.hs.URL}})
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
			t.Errorf("POST /login?token=… with an empty form: %d %v, want 401 and no cookie", resp.StatusCode, resp.Cookies())
		}
	})

	t.Run("cross-site login", func(t *testing.T) {
		for _, h := range []http.Header{
			{"Origin": {"https://evil.example"}},
			{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}},
			{"Sec-Fetch-Site": {"same-site"}},
		} {
			resp := f.postLogin(t, "/login", testToken, h)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
				t.Errorf("login with %v: %d %v, want 403 and no cookie", h, resp.StatusCode, resp.Cookies())
			}
		}
	})

	cookie := f.login(t)
	t.Run("cross-site request with the cookie", func(t *testing.T) {
		for _, h := range []http.Header{
			{"Origin": {"https://evil.example"}},
			{"Sec-Fetch-Site": {"cross-site"}},
			{"Sec-Fetch-Site": {"same-site"}, "Origin": {"https://sub.example"}},
		} {
			h.Set("Cookie", cookie.String())
			resp, body := f.request(t.Context(), "POST", "/v1/sessions/s/confirm/c1", map[string]any{"approve": true, "args_hash": "h"}, h)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("confirm with the cookie and %v: %d %s, want 403", h, resp.StatusCode, body)
			}
		}
		// The page's own requests pass.
		h := http.Header{"Cookie": {cookie.String()}, "Origin": {f.hs.URL}, "Sec-Fetch-Site": {"same-origin"}}
		if resp, body := f.request(t.Context(), "POST", "/v1/sessions/s/confirm/c1", map[string]any{"approve": true, "args_hash": "h"}, h); resp.StatusCode != http.StatusNotFound {
			t.Errorf("confirm from the page: %d %s, want 404 (nothing waits)", resp.StatusCode, body)
		}
		// A bearer token is not a cookie: no origin check.
		h = http.Header{"Authorization": {"Bearer " + testToken}, "Origin": {"https://app.example"}}
		if resp, body := f.request(t.Context(), "POST", "/v1/sessions/s/confirm/c1", map[string]any{"approve": true, "args_hash": "h"}, h); resp.StatusCode != http.StatusNotFound {
			t.Errorf("confirm with the bearer token: %d %s, want 404", resp.StatusCode, body)
		}
	})

	t.Run("secure cookie over TLS", func(t *testing.T) {
		req := httptest.NewRequest("POST", "https://127.0.0.1/login", strings.NewReader(url.Values{"token": {testToken}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.TLS = &tls.ConnectionState{}
		rec := httptest.NewRecorder()
		f.srv.Handler().ServeHTTP(rec, req)
		cookies := rec.Result().Cookies()
		if rec.Code != http.StatusSeeOther || len(cookies) != 1 || !cookies[0].Secure {
			t.Errorf("login over TLS: %d %v, want a Secure cookie", rec.Code, cookies)
		}
	})

	if strings.Contains(logs.String(), testToken) {
		t.Errorf("the service's log carries the token:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `"route":"POST /login"`) {
		t.Errorf("the log has no login request (is it at debug level?):\n%s", logs.String())
	}
}
