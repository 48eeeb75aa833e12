package web

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

// recorder is a loopback server that keeps every request it gets, whole
// (request line, headers, body), and answers 200.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(r.record))
	t.Cleanup(r.Close)
	return r
}

// record keeps req and answers 200.
func (r *recorder) record(w http.ResponseWriter, req *http.Request) {
	dump, _ := httputil.DumpRequest(req, true)
	r.mu.Lock()
	r.seen = append(r.seen, string(dump))
	r.mu.Unlock()
	io.WriteString(w, "recorded\n")
}

// requests returns what the server got, one dump per request.
func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// origin returns the normalised origin of a test server.
func origin(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	o, err := secrets.OriginOf(u)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// boundSecrets opens a store holding name=value bound to origins.
func boundSecrets(t *testing.T, name, value string, origins ...string) *secrets.Store {
	t.Helper()
	t.Setenv(secrets.EnvKey, "")
	s, err := secrets.Open(cachestore.NewMemory(), t.TempDir()+"/secret.key", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(context.Background(), name, value, "", origins...); err != nil {
		t.Fatal(err)
	}
	return s
}

// leaked reports whether text holds the value in a form a server could
// use: as is, query-escaped, path-escaped or base64.
func leaked(text, value string) bool {
	for _, f := range []string{value, url.QueryEscape(value), url.PathEscape(value), base64.StdEncoding.EncodeToString([]byte(value))} {
		if strings.Contains(text, f) {
			return true
		}
	}
	return false
}

// TestSecretReachesOnlyItsOrigin: a secret bound to server A is sent to A
// by a read-only GET, and never reaches server B, wherever the reference
// is and whatever the method; B's server records nothing secret.
func TestSecretReachesOnlyItsOrigin(t *testing.T) {
	a := newSite(t)
	b := newRecorder(t)
	deps := testDeps(newFakeClock())
	deps.Secrets = boundSecrets(t, "T", tokenValue, origin(t, a.URL))
	ws, err := builtin.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	deps.Workspace = ws
	w := newWeb(t, deps)
	httpTool := tool(t, w, HTTPRequestName)

	// To A: a GET with the secret in a header is read-only and reaches A.
	toA := obj{"url": a.URL + "/echo", "headers": obj{"X-Api-Key": "${secret:T}"}}
	if !httpTool.IsReadOnly(mustArgs(t, `{"url":"`+a.URL+`/echo","headers":{"X-Api-Key":"${secret:T}"}}`)) {
		t.Error("a GET with a secret header to its origin is not read-only")
	}
	if _, err := call(t, w, HTTPRequestName, "s1", toA); err != nil {
		t.Fatalf("GET to the bound origin: %v", err)
	}
	if got := a.headers().Get("X-Api-Key"); got != tokenValue {
		t.Fatalf("A saw X-Api-Key %q", got)
	}
	// The origin may be written with other letter cases.
	upper := strings.Replace(a.URL, "http://", "HTTP://", 1)
	if _, err := call(t, w, HTTPRequestName, "s1", obj{"url": upper + "/echo?k=${secret:T}"}); err != nil {
		t.Fatalf("GET to the bound origin in upper case: %v", err)
	}

	tests := []struct {
		name string
		tool string
		args obj
	}{
		{"url query", HTTPRequestName, obj{"url": b.URL + "/x?k=${secret:T}"}},
		{"url path", HTTPRequestName, obj{"url": b.URL + "/x/${secret:T}/y"}},
		{"url fragment", HTTPRequestName, obj{"url": b.URL + "/x#${secret:T}"}},
		{"header", HTTPRequestName, obj{"url": b.URL + "/x", "headers": obj{"X-Api-Key": "${secret:T}"}}},
		{"authorization", HTTPRequestName, obj{"url": b.URL + "/x", "headers": obj{"Authorization": "Bearer ${secret:T}"}}},
		{"host header", HTTPRequestName, obj{"url": b.URL + "/x", "headers": obj{"Host": "${secret:T}"}}},
		{"post body", HTTPRequestName, obj{"url": b.URL + "/x", "method": "POST", "body": "k=${secret:T}"}},
		{"get body", HTTPRequestName, obj{"url": b.URL + "/x", "body": `{"k":"${secret:T}"}`}},
		{"head", HTTPRequestName, obj{"url": b.URL + "/x", "method": "HEAD", "headers": obj{"X-Api-Key": "${secret:T}"}}},
		{"delete", HTTPRequestName, obj{"url": b.URL + "/x?k=${secret:T}", "method": "DELETE"}},
		{"options", HTTPRequestName, obj{"url": b.URL + "/x", "method": "OPTIONS", "headers": obj{"Cookie": "k=${secret:T}"}}},
		{"user info", HTTPRequestName, obj{"url": "http://u:${secret:T}@" + strings.TrimPrefix(b.URL, "http://") + "/x"}},
		{"in the host", HTTPRequestName, obj{"url": "http://${secret:T}." + strings.TrimPrefix(b.URL, "http://") + "/x"}},
		{"download header", DownloadFileName, obj{"url": b.URL + "/x", "path": "f.txt", "headers": obj{"X-Api-Key": "${secret:T}"}}},
		{"download url", DownloadFileName, obj{"url": b.URL + "/x?k=${secret:T}", "path": "g.txt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, w, tt.tool, "s1", tt.args)
			if err == nil {
				t.Fatal("a request to another origin with the secret succeeded")
			}
			if strings.Contains(err.Error(), tokenValue) {
				t.Errorf("the error holds the value: %v", err)
			}
		})
	}
	for _, req := range b.requests() {
		if leaked(req, tokenValue) {
			t.Errorf("B got the secret:\n%s", req)
		}
	}
	if n := len(b.requests()); n != 0 {
		t.Errorf("B got %d requests; a refused secret must stop the request before dialing", n)
	}

	// The refusal names the allowed origin, and says what the model can do.
	_, err = call(t, w, HTTPRequestName, "s1", obj{"url": b.URL + "/x", "headers": obj{"X-Api-Key": "${secret:T}"}})
	wantErr(t, err, `secret "T" may only be sent to `+origin(t, a.URL), origin(t, b.URL))
	if !errors.Is(err, secrets.ErrOrigin) && !strings.Contains(err.Error(), "origin not allowed") {
		t.Errorf("not an origin refusal: %v", err)
	}
}

// TestSecretRedirectToOtherOrigin: A redirects to B; whatever carried the
// secret (header, query, body) never reaches B.
func TestSecretRedirectToOtherOrigin(t *testing.T) {
	a := newSite(t)
	b := newRecorder(t)
	deps := testDeps(newFakeClock())
	deps.Secrets = boundSecrets(t, "T", tokenValue, origin(t, a.URL))
	w := newWeb(t, deps)
	to := a.URL + "/to?url=" + url.QueryEscape(b.URL+"/landing")
	for _, args := range []obj{
		{"url": to, "headers": obj{"X-Api-Key": "${secret:T}"}},
		{"url": to, "headers": obj{"Authorization": "Bearer ${secret:T}"}},
		{"url": to + "&k=${secret:T}"},
		{"url": to, "method": "POST", "body": "k=${secret:T}"},
		{"url": to, "method": "HEAD", "headers": obj{"X-Api-Key": "${secret:T}"}},
	} {
		res, err := call(t, w, HTTPRequestName, "s1", args)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		mustContain(t, res.Content, "HTTP 302", "Location: "+b.URL+"/landing")
		mustNotContain(t, res.Content, tokenValue)
	}
	for _, req := range b.requests() {
		if leaked(req, tokenValue) {
			t.Errorf("B got the secret through a redirect:\n%s", req)
		}
	}
	// A same-origin redirect is followed with the secret.
	res, err := call(t, w, HTTPRequestName, "s1", obj{"url": a.URL + "/to?url=" + url.QueryEscape("/echo"), "headers": obj{"X-Api-Key": "${secret:T}"}})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "GET /echo", "X-Api-Key: [secret:T]")
}

// TestSecretWithoutOrigins: a secret stored without origins (as every
// secret was before origins existed) is sent nowhere, and the refusal
// says how to bind it; an operator binding lets it through.
func TestSecretWithoutOrigins(t *testing.T) {
	a := newSite(t)
	deps := testDeps(newFakeClock())
	sec := boundSecrets(t, "OLD", tokenValue)
	deps.Secrets = sec
	w := newWeb(t, deps)
	args := obj{"url": a.URL + "/echo", "headers": obj{"X-Api-Key": "${secret:OLD}"}}
	_, err := call(t, w, HTTPRequestName, "s1", args)
	wantErr(t, err, `secret "OLD" is bound to no origin`, "[[secrets.bind]]", "store_secret")
	if n := a.count("/echo"); n != 0 {
		t.Fatalf("A got %d requests", n)
	}
	if err := sec.Bind("OLD", a.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, w, HTTPRequestName, "s1", args); err != nil {
		t.Fatalf("after Bind: %v", err)
	}
	if got := a.headers().Get("X-Api-Key"); got != tokenValue {
		t.Errorf("A saw %q", got)
	}
}

// TestAPIBindsItsSecret: an API of the configuration binds the secret of
// its auth header to its base URL's origin (and to its extra origins).
func TestAPIBindsItsSecret(t *testing.T) {
	a := newSite(t)
	b := newRecorder(t)
	deps := testDeps(newFakeClock())
	sec := boundSecrets(t, "SVC_KEY", tokenValue)
	deps.Secrets = sec
	deps.Config.APIs = []API{{Name: "svc", BaseURL: a.URL + "/v1", AuthHeader: "X-Api-Key", AuthValue: "${secret:SVC_KEY}"}}
	w := newWeb(t, deps)
	if _, err := call(t, w, HTTPRequestName, "s1", obj{"url": a.URL + "/echo", "headers": obj{"X-Api-Key": "${secret:SVC_KEY}"}}); err != nil {
		t.Fatalf("to the API's origin: %v", err)
	}
	_, err := call(t, w, HTTPRequestName, "s1", obj{"url": b.URL + "/x", "headers": obj{"X-Api-Key": "${secret:SVC_KEY}"}})
	wantErr(t, err, "may only be sent to "+origin(t, a.URL))
	if len(b.requests()) != 0 {
		t.Error("B got a request")
	}
	res, err := call(t, w, PublicAPIListName, "s1", obj{})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "its secret is sent only to: "+origin(t, a.URL))
}

// TestReadOnlyMeansNoBodyNoOverride: a GET or HEAD with a body or a
// method-override header needs approval like any other method.
func TestReadOnlyMeansNoBodyNoOverride(t *testing.T) {
	w := newWeb(t, testDeps(newFakeClock()))
	httpTool := tool(t, w, HTTPRequestName)
	for _, tt := range []struct {
		args string
		want bool
	}{
		{`{"url":"http://x/"}`, true},
		{`{"url":"http://x/","method":"HEAD","headers":{"Accept":"text/plain"}}`, true},
		{`{"url":"http://x/","body":""}`, true},
		{`{"url":"http://x/","body":"{\"delete\":true}"}`, false},
		{`{"url":"http://x/","method":"HEAD","body":"x"}`, false},
		{`{"url":"http://x/","headers":{"X-HTTP-Method-Override":"DELETE"}}`, false},
		{`{"url":"http://x/","headers":{"x-http-method-override":"PUT"}}`, false},
		{`{"url":"http://x/","headers":{"X-Http-Method":"POST"}}`, false},
		{`{"url":"http://x/","method":"HEAD","headers":{"X-Method-Override":"PATCH"}}`, false},
		{`{"url":"http://x/","headers":{"X-HTTP-Method-Override":""}}`, false},
	} {
		if got := httpTool.IsReadOnly(mustArgs(t, tt.args)); got != tt.want {
			t.Errorf("http_request %s read-only = %v, want %v", tt.args, got, tt.want)
		}
	}
}
