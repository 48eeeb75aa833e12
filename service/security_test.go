package service

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testToken = "test-token-0123456789"

// TestBearerAuth: with a token, every request but the health check and
// the login page needs it, as a bearer token or the page's cookie (the
// login itself: login_test.go).
func TestBearerAuth(t *testing.T) {
	f := newFixture(t, fixtureOpts{token: testToken})
	f.token = "" // send credentials by hand
	page := f.pageHeaders()
	page.Set("Cookie", f.login(t).String())
	tests := []struct {
		name   string
		path   string
		header http.Header
		want   int
	}{
		{"no token", "/v1/sessions", nil, http.StatusUnauthorized},
		{"wrong token", "/v1/sessions", http.Header{"Authorization": {"Bearer wrong"}}, http.StatusUnauthorized},
		{"token prefix", "/v1/sessions", http.Header{"Authorization": {"Bearer " + testToken[:10]}}, http.StatusUnauthorized},
		{"basic scheme", "/v1/sessions", http.Header{"Authorization": {"Basic " + testToken}}, http.StatusUnauthorized},
		{"right token", "/v1/sessions", http.Header{"Authorization": {"Bearer " + testToken}}, http.StatusOK},
		{"metrics need it", "/metrics", nil, http.StatusUnauthorized},
		{"page script needs it", "/static/page.js", nil, http.StatusUnauthorized},
		{"health without token", "/healthz", nil, http.StatusOK},
		{"token cookie value is not the token", "/v1/sessions", http.Header{"Cookie": {tokenCookie + "=" + testToken}, "Sec-Fetch-Site": {"same-origin"}}, http.StatusUnauthorized},
		{"page cookie", "/v1/sessions", page, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := f.request(t.Context(), "GET", tt.path, nil, tt.header)
			if resp.StatusCode != tt.want {
				t.Fatalf("%d %s, want %d", resp.StatusCode, body, tt.want)
			}
			if tt.want == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without WWW-Authenticate: Bearer")
			}
			if strings.Contains(string(body), testToken) {
				t.Errorf("the response shows the token: %s", body)
			}
		})
	}
}

// TestCORS: closed by default; an allowed origin gets the headers.
func TestCORS(t *testing.T) {
	preflight := http.Header{"Origin": {"https://evil.example"}, "Access-Control-Request-Method": {"POST"}}
	t.Run("closed", func(t *testing.T) {
		f := newFixture(t, fixtureOpts{})
		resp, body := f.request(t.Context(), "OPTIONS", "/v1/sessions/s/turns", nil, preflight)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("preflight: %d %s, want 403", resp.StatusCode, body)
		}
		resp, _ = f.request(t.Context(), "GET", "/v1/sessions", nil, http.Header{"Origin": {"https://evil.example"}})
		for k := range resp.Header {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("CORS header %s on a closed server", k)
			}
		}
	})
	t.Run("allowed origin", func(t *testing.T) {
		f := newFixture(t, fixtureOpts{allowOrigins: []string{"https://app.example"}})
		h := http.Header{"Origin": {"https://app.example"}, "Access-Control-Request-Method": {"POST"}}
		resp, body := f.request(t.Context(), "OPTIONS", "/v1/sessions/s/turns", nil, h)
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
			t.Errorf("allowed preflight: %d %v %s", resp.StatusCode, resp.Header, body)
		}
		resp, _ = f.request(t.Context(), "OPTIONS", "/v1/sessions/s/turns", nil, preflight)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("other origin's preflight: %d, want 403", resp.StatusCode)
		}
	})
}

// TestSecurityHeaders: responses forbid sniffing, framing and foreign
// content; a server without a token answers only loopback host names.
func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	resp, body := f.do("GET", "/", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("page: %d %s", resp.StatusCode, body)
	}
	for k, want := range map[string]string{
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "no-referrer",
		"X-Frame-Options":        "DENY",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	for _, banned := range []string{"http://", "https://", "//cdn", "fonts."} {
		if strings.Contains(string(body), banned) {
			t.Errorf("the page refers to %q: it must load nothing from elsewhere", banned)
		}
	}

	req, _ := http.NewRequestWithContext(t.Context(), "GET", f.url+"/v1/sessions", nil)
	req.Host = "rebound.example"
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a foreign Host without a token: %d, want 403", resp.StatusCode)
	}
}

// TestCrossSiteFormsCannotPost: a web page can send a form or text/plain
// body to any address without a CORS preflight. A body of those types is
// refused (415) even when it holds valid JSON, so another site's page in
// the operator's browser cannot post a turn or an answer to the token-less
// loopback service: nothing runs and nothing is written.
func TestCrossSiteFormsCannotPost(t *testing.T) {
	f := newFixture(t, fixtureOpts{approve: "all"})
	body := `{"approve":"all","provider":"claude-code","auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[` +
		`{"id":"x","type":"function","function":{"name":"edit_file","arguments":"{\"path\":\"csrf.txt\",\"content\":\"x\"}"}}]}}`
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain; charset=utf-8"} {
		h := http.Header{"Content-Type": {ct}, "Origin": {"https://evil.example"}}
		for _, path := range []string{"/v1/sessions/csrf/turns", "/v1/sessions/csrf/confirm/x"} {
			resp, data := f.request(t.Context(), "POST", path, body, h)
			if resp.StatusCode != http.StatusUnsupportedMediaType {
				t.Errorf("POST %s as %s: %d %s, want 415", path, ct, resp.StatusCode, data)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(f.dir, "csrf.txt")); !os.IsNotExist(err) {
		t.Errorf("csrf.txt exists (%v): a cross-site form ran a call", err)
	}
	if resp, _ := f.do("GET", "/v1/sessions/csrf", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/sessions/csrf: %d, want 404: nothing may be committed", resp.StatusCode)
	}
}
