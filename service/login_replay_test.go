package service

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/actors"
)

// pageHeaders are what the operator page's own fetches send.
func (f *fixture) pageHeaders() http.Header {
	return http.Header{"Sec-Fetch-Site": {"same-origin"}, "Origin": {f.hs.URL}}
}

// login signs in through the login form as the page does and returns the
// cookie it got.
func (f *fixture) login(t *testing.T) *http.Cookie {
	t.Helper()
	resp := f.postLogin(t, "/login", f.secret, f.pageHeaders())
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == tokenCookie {
			return c
		}
	}
	t.Fatalf("the login gave %d and no cookie %s", resp.StatusCode, tokenCookie)
	return nil
}

// deferEdit posts a turn whose edit_file waits for a deferred approval and
// returns the approval's args_hash.
func (f *fixture) deferEdit(t *testing.T, session, callID string) string {
	t.Helper()
	body := turn("r", "ask", call(t, callID, "edit_file", map[string]any{"path": "notes.md", "content": "pwned\n"}))
	body["confirm"] = "defer"
	if got := statuses(f.postTurn(session, body).Messages); len(got) != 1 || got[0] != "awaiting_approval" {
		t.Fatalf("deferred turn: %v", got)
	}
	var pending struct {
		Confirmations []PendingView `json:"confirmations"`
	}
	_, b := f.do(http.MethodGet, "/v1/pending", nil)
	mustUnmarshal(t, b, &pending)
	if len(pending.Confirmations) != 1 {
		t.Fatalf("pending: %s", b)
	}
	return pending.Confirmations[0].ArgsHash
}

// cookieRequest sends a request that carries only the cookie (no bearer
// token) and header, as curl or another program would.
func (f *fixture) cookieRequest(t *testing.T, method, path, body string, c *http.Cookie, header http.Header) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, f.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.AddCookie(c)
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := f.noRedirects().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestCopiedCookieIsNotABearerToken: the page's cookie, copied out of the
// browser (another local user's server on another port of 127.0.0.1
// receives it, as browsers do not isolate cookies by port) and replayed by
// a program that sends no Origin and no Sec-Fetch-Site, opens nothing: it
// neither approves a deferred edit_file nor lists or reads anything. Nor
// does the cookie sent by a page of another port (same-site) or site.
func TestCopiedCookieIsNotABearerToken(t *testing.T) {
	f := newFixture(t, fixtureOpts{token: testToken, approve: actors.ApproveAsk})
	hash := f.deferEdit(t, "s", "e1")
	cookie := f.login(t)
	confirm := `{"approve":true,"args_hash":"` + hash + `"}`
	otherPort := "http://127.0.0.1:1"
	for _, h := range []http.Header{
		nil,
		{"Sec-Fetch-Site": {"same-site"}},
		{"Sec-Fetch-Site": {"cross-site"}},
		{"Origin": {otherPort}},
		{"Sec-Fetch-Site": {"same-site"}, "Origin": {otherPort}},
		{"Sec-Fetch-Site": {"none"}},
	} {
		for _, req := range []struct{ method, path, body string }{
			{http.MethodPost, "/v1/sessions/s/confirm/e1", confirm},
			{http.MethodGet, "/v1/pending", ""},
			{http.MethodGet, "/v1/sessions", ""},
			{http.MethodGet, "/v1/sessions/s", ""},
			{http.MethodGet, "/v1/tools", ""},
			{http.MethodGet, "/", ""},
			{http.MethodGet, "/static/page.js", ""},
		} {
			code := f.cookieRequest(t, req.method, req.path, req.body, cookie, h)
			if code != http.StatusUnauthorized && code != http.StatusForbidden && !(req.path == "/" && code == http.StatusSeeOther) {
				t.Errorf("%s %s with a copied cookie and %v: %d, want 401 or 403", req.method, req.path, h, code)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "notes.md")); string(b) != workspaceFiles["notes.md"] {
		t.Errorf("a copied cookie approved the deferred edit: notes.md = %q", b)
	}
	var pending struct {
		Confirmations []PendingView `json:"confirmations"`
	}
	_, b := f.do(http.MethodGet, "/v1/pending", nil)
	mustUnmarshal(t, b, &pending)
	if len(pending.Confirmations) != 1 {
		t.Errorf("the approval no longer waits: %s", b)
	}
	// The page's own requests, with the same cookie, pass.
	if code := f.cookieRequest(t, http.MethodGet, "/v1/pending", "", cookie, f.pageHeaders()); code != http.StatusOK {
		t.Errorf("GET /v1/pending from the page: %d, want 200", code)
	}
	if code := f.cookieRequest(t, http.MethodGet, "/v1/pending", "", cookie, http.Header{"Origin": {f.hs.URL}}); code != http.StatusOK {
		t.Errorf("GET /v1/pending with the service's own Origin: %d, want 200", code)
	}
}

// TestLogoutEndsThatLoginOnly: POST /logout from the page ends the login
// of its cookie and no other; a logout posted from another site is refused
// and ends nothing.
func TestLogoutEndsThatLoginOnly(t *testing.T) {
	f := newFixture(t, fixtureOpts{token: testToken, approve: actors.ApproveAsk})
	a, b := f.login(t), f.login(t)
	if a.Value == b.Value {
		t.Fatalf("two logins got the same cookie value")
	}
	if code := f.cookieRequest(t, http.MethodGet, "/v1/pending", "", a, f.pageHeaders()); code != http.StatusOK {
		t.Fatalf("login a before the logout: %d", code)
	}
	cross := http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}}
	if code := f.cookieRequest(t, http.MethodPost, "/logout", "", a, cross); code != http.StatusForbidden {
		t.Fatalf("a cross-site logout: %d, want 403", code)
	}
	if code := f.cookieRequest(t, http.MethodGet, "/v1/pending", "", a, f.pageHeaders()); code != http.StatusOK {
		t.Fatalf("login a after a refused cross-site logout: %d, want 200", code)
	}
	if code := f.cookieRequest(t, http.MethodPost, "/logout", "", a, f.pageHeaders()); code >= 400 {
		t.Fatalf("logout: %d", code)
	}
	if code := f.cookieRequest(t, http.MethodGet, "/v1/pending", "", a, f.pageHeaders()); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Fatalf("login a after its logout: %d, want 401 or 403", code)
	}
	if code := f.cookieRequest(t, http.MethodGet, "/v1/pending", "", b, f.pageHeaders()); code != http.StatusOK {
		t.Fatalf("login b after a's logout: %d, want 200", code)
	}
}
