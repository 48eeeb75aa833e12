package web

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

const tokenValue = "ghp_Zx81Kq0Lm2Nv7Bc4Xd9Ws3Er"

func TestHTTPRequestResolvesAndRedactsSecrets(t *testing.T) {
	s := newSite(t)
	var logs bytes.Buffer
	deps := testDeps(newFakeClock())
	deps.Secrets = openSecrets(t, map[string]string{"GITHUB_TOKEN": tokenValue, "PW": "p@ss word&more"}, s.URL, "http://127.0.0.1:1")
	deps.Logger = zerolog.New(&logs).Level(zerolog.DebugLevel)
	w := newWeb(t, deps)

	res, err := call(t, w, HTTPRequestName, "s1", obj{
		"url":     s.URL + "/echo?token=${secret:GITHUB_TOKEN}&pw=${secret:PW}",
		"method":  "POST",
		"headers": obj{"Authorization": "Bearer ${secret:GITHUB_TOKEN}", "X-Plain": "visible"},
		"body":    `{"token":"${secret:GITHUB_TOKEN}"}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The server got the real values.
	h := s.headers()
	if got := h.Get("Authorization"); got != "Bearer "+tokenValue {
		t.Fatalf("server saw Authorization %q", got)
	}
	// The model sees none of them, in any form.
	mustContain(t, res.Content,
		"HTTP 200 OK",
		"POST /echo?token=[secret:GITHUB_TOKEN]&pw=[secret:PW]",
		"Authorization: Bearer [secret:GITHUB_TOKEN]",
		"X-Plain: visible",
		"Content-Type: application/json",
		`{"token":"[secret:GITHUB_TOKEN]"}`,
	)
	mustNotContain(t, res.Content, tokenValue, url.QueryEscape("p@ss word&more"), "p@ss word")
	if res.Cache != nil {
		t.Error("a request with secrets returned a cache entry")
	}

	// Errors are redacted too, and a 401 says so.
	_, err = call(t, w, HTTPRequestName, "s1", obj{
		"url":     s.URL + "/status/401",
		"headers": obj{"Authorization": "Bearer ${secret:GITHUB_TOKEN}"},
	})
	wantErr(t, err, "HTTP 401 Unauthorized", "store_secret", `"auth":"Bearer [secret:GITHUB_TOKEN]"`)
	mustNotContain(t, err.Error(), tokenValue)
	_, err = call(t, w, HTTPRequestName, "s1", obj{"url": s.URL + "/status/403?k=${secret:GITHUB_TOKEN}"})
	wantErr(t, err, "HTTP 403 Forbidden")

	// A secret in the path is filled in and redacted the same way.
	res, err = call(t, w, HTTPRequestName, "s1", obj{"url": s.URL + "/echo/${secret:GITHUB_TOKEN}/repos"})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "GET /echo/[secret:GITHUB_TOKEN]/repos")
	if n := s.count("/echo/" + tokenValue + "/repos"); n != 1 {
		t.Errorf("the server did not get the resolved path (%d)", n)
	}

	// Basic authorization built from a secret is redacted too.
	basic := base64.StdEncoding.EncodeToString([]byte("me:" + tokenValue))
	res, err = call(t, w, HTTPRequestName, "s1", obj{"url": s.URL + "/echo", "headers": obj{"Authorization": "Basic " + basic}})
	if err != nil {
		t.Fatal(err)
	}
	mustNotContain(t, res.Content, basic)

	// A connection error names the URL as written, not as resolved.
	_, err = call(t, w, HTTPRequestName, "s1", obj{"url": "http://127.0.0.1:1/x?k=${secret:GITHUB_TOKEN}"})
	wantErr(t, err, "the request failed")
	mustNotContain(t, err.Error(), tokenValue)

	if strings.Contains(logs.String(), tokenValue) {
		t.Errorf("logs hold the secret:\n%s", logs.String())
	}
}

func TestHTTPRequestMissingSecret(t *testing.T) {
	s := newSite(t)
	for _, sec := range []bool{true, false} {
		deps := testDeps(newFakeClock())
		if sec {
			deps.Secrets = openSecrets(t, nil)
		}
		w := newWeb(t, deps)
		for _, args := range []obj{
			{"url": s.URL + "/echo", "headers": obj{"Authorization": "Bearer ${secret:NOPE}"}},
			{"url": s.URL + "/echo?k=${secret:NOPE}"},
			{"url": s.URL + "/echo", "method": "POST", "body": "${secret:NOPE}"},
		} {
			_, err := call(t, w, HTTPRequestName, "s1", args)
			wantErr(t, err, `secret "NOPE" not found`)
		}
	}
	if n := s.count("/echo"); n != 0 {
		t.Errorf("requests with a missing secret were sent (%d)", n)
	}
}

func TestHTTPRequest(t *testing.T) {
	s := newSite(t)
	w := newWeb(t, testDeps(newFakeClock()))
	tests := []struct {
		name string
		args obj
		want []string
		not  []string
		err  []string
	}{
		{name: "get json", args: obj{"url": s.URL + "/json"},
			want: []string{"HTTP 200 OK\nContent-Type: application/json\n", `{"name":"tooldispatch","stars":42,"tags":["agents","tools"]}`}},
		{name: "post json body", args: obj{"url": s.URL + "/echo", "method": "post", "body": `{"a":1}`},
			want: []string{"POST /echo", "Content-Type: application/json", `{"a":1}`}},
		{name: "put text body with own type", args: obj{"url": s.URL + "/echo", "method": "PUT", "body": "a=1", "headers": obj{"Content-Type": "application/x-www-form-urlencoded"}},
			want: []string{"PUT /echo", "Content-Type: application/x-www-form-urlencoded", "\na=1"}},
		{name: "delete", args: obj{"url": s.URL + "/echo", "method": "DELETE"}, want: []string{"DELETE /echo"}},
		{name: "user agent", args: obj{"url": s.URL + "/echo"}, want: []string{"User-Agent: " + DefaultUserAgent}},
		{name: "head shows headers", args: obj{"url": s.URL + "/json", "method": "HEAD"},
			want: []string{"HTTP 200 OK", "Content-Type: application/json"}, not: []string{"stars"}},
		{name: "cookies hidden", args: obj{"url": s.URL + "/cookie"}, want: []string{"Set-Cookie: (1 cookies, not shown)"}, not: []string{"abc"}},
		{name: "binary body", args: obj{"url": s.URL + "/binary"}, want: []string{"binary body", "image/png", "download_file"}},
		{name: "cut at max_chars", args: obj{"url": s.URL + "/json", "max_chars": 100},
			want: []string{`{"name":"tooldispatch"`}},
		{name: "max_chars small", args: obj{"url": s.URL + "/huge", "max_chars": 100}, want: []string{"[body cut at 100 of"}},
		{name: "404 with body", args: obj{"url": s.URL + "/status/404"}, err: []string{"HTTP 404 Not Found", `{"error":"status 404"`}},
		{name: "bad method", args: obj{"url": s.URL + "/json", "method": "TRACE"}, err: []string{`method "TRACE" is not supported`}},
		{name: "bad header name", args: obj{"url": s.URL + "/json", "headers": obj{"Bad Header": "x"}}, err: []string{`header name "Bad Header" is not valid`}},
		{name: "header with line break", args: obj{"url": s.URL + "/json", "headers": obj{"X-A": "a\r\nX-B: b"}}, err: []string{`header "X-A" holds a line break`}},
		{name: "header not a string", args: obj{"url": s.URL + "/json", "headers": obj{"X-A": 1}}, err: []string{`header "X-A" must have a string value`}},
		{name: "relative url", args: obj{"url": "/json"}, err: []string{"no scheme and host"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := call(t, w, HTTPRequestName, "s1", tt.args)
			if tt.err != nil {
				wantErr(t, err, tt.err...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			mustContain(t, res.Content, tt.want...)
			mustNotContain(t, res.Content, tt.not...)
		})
	}
}

func TestToolFlags(t *testing.T) {
	ws, err := builtin.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	deps := testDeps(newFakeClock())
	deps.Workspace = ws
	deps.Search = &fakeSearch{}
	reg := toolkit.NewRegistry()
	w := Register(reg, deps) // every schema compiles
	defer w.Close()

	var names []string
	for _, tl := range reg.All() {
		names = append(names, tl.Name)
	}
	if got := strings.Join(names, ","); got != "download_file,fetch_page,http_request,public_api_list,search_web" {
		t.Fatalf("registered %s", got)
	}
	readOnly := map[string]any{
		FetchPageName:     true,
		SearchWebName:     true,
		PublicAPIListName: true,
		DownloadFileName:  false,
		HTTPRequestName:   "depends on arguments",
	}
	for _, tl := range reg.All() {
		if !tl.Concurrent {
			t.Errorf("%s is not concurrent", tl.Name)
		}
		if got := tl.ReadOnlyLabel(); got != readOnly[tl.Name] {
			t.Errorf("%s read-only = %v, want %v", tl.Name, got, readOnly[tl.Name])
		}
		if tl.Timeout <= 0 {
			t.Errorf("%s has no timeout", tl.Name)
		}
	}
	if got := tool(t, w, DownloadFileName).Paths(mustArgs(t, `{"url":"http://x/","path":"./a/../b.txt"}`)); strings.Join(got, ",") != "b.txt" {
		t.Errorf("download_file paths = %v", got)
	}

	http := tool(t, w, HTTPRequestName)
	for _, tt := range []struct {
		args string
		want bool
	}{
		{`{"url":"http://x/"}`, true},
		{`{"url":"http://x/","method":"GET"}`, true},
		{`{"url":"http://x/","method":"get"}`, true},
		{`{"url":"http://x/","method":"HEAD"}`, true},
		{`{"url":"http://x/","method":"POST"}`, false},
		{`{"url":"http://x/","method":"PUT"}`, false},
		{`{"url":"http://x/","method":"PATCH"}`, false},
		{`{"url":"http://x/","method":"DELETE"}`, false},
		{`{"url":"http://x/","method":"OPTIONS"}`, false},
	} {
		if got := http.IsReadOnly(mustArgs(t, tt.args)); got != tt.want {
			t.Errorf("http_request %s read-only = %v, want %v", tt.args, got, tt.want)
		}
	}

	// Without a search backend or a workspace those tools are left out.
	w2 := newWeb(t, Deps{})
	var got []string
	for _, tl := range w2.Tools() {
		got = append(got, tl.Name)
	}
	if strings.Join(got, ",") != "fetch_page,http_request,public_api_list" {
		t.Errorf("minimal tools: %v", got)
	}
}

func TestClosedWebRefusesSharedWork(t *testing.T) {
	s := newSite(t)
	w, err := New(testDeps(newFakeClock()))
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	_, err = call(t, w, FetchPageName, "s1", obj{"url": s.URL + "/article"})
	if !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"negative timeout", Config{Timeout: -time.Second}, "timeout"},
		{"negative max bytes", Config{MaxBytes: -1}, "max_bytes"},
		{"bad redirects", Config{MaxRedirects: -2}, "max_redirects"},
		{"bad search url", Config{SearchURL: "searx.local"}, "search_url"},
		{"api without name", Config{APIs: []API{{BaseURL: "https://a.example"}}}, "apis[0].name"},
		{"api without url", Config{APIs: []API{{Name: "a"}}}, "apis[0].base_url"},
		{"api twice", Config{APIs: []API{{Name: "A", BaseURL: "https://a.example"}, {Name: "a", BaseURL: "https://b.example"}}}, "listed twice"},
		{"auth value alone", Config{APIs: []API{{Name: "a", BaseURL: "https://a.example", AuthValue: "x"}}}, "auth_header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr(t, tt.cfg.Validate(), tt.want)
			if _, err := New(Deps{Config: tt.cfg}); err == nil {
				t.Error("New accepted the config")
			}
		})
	}
	p := Config{MaxRedirects: -1, AllowPrivate: true}.Policy()
	if p.MaxRedirects != 0 || !p.AllowPrivate || p.AllowLoopback || p.Timeout != DefaultTimeout || p.MaxBytes != DefaultMaxBytes {
		t.Errorf("policy from config: %+v", p)
	}
}

func mustArgs(t *testing.T, s string) toolkit.Args {
	t.Helper()
	a, err := toolkit.ParseArgs(s, toolkit.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
