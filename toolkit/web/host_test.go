package web

import (
	"net/url"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// TestHostHeaderMustNameTheURLHost: a Host header other than the URL's host
// would send the request (and the secret bound to the URL's origin) to
// another virtual host behind the same address; it is refused on every
// request. A Host header naming the URL's host is accepted.
func TestHostHeaderMustNameTheURLHost(t *testing.T) {
	b := newRecorder(t)
	deps := testDeps(newFakeClock())
	deps.Secrets = boundSecrets(t, "T", tokenValue, origin(t, b.URL))
	w := newWeb(t, deps)
	for _, args := range []obj{
		{"url": b.URL + "/x", "headers": obj{"Host": "admin.internal", "X-Api-Key": "${secret:T}"}},
		{"url": b.URL + "/x", "headers": obj{"host": "admin.internal:8080", "Authorization": "Bearer ${secret:T}"}},
		{"url": b.URL + "/x?k=${secret:T}", "headers": obj{"HOST": "admin.internal"}},
		{"url": b.URL + "/x", "method": "POST", "body": "k=${secret:T}", "headers": obj{"Host": "admin.internal"}},
		{"url": b.URL + "/x", "headers": obj{"Host": "admin.internal"}},
	} {
		_, err := call(t, w, HTTPRequestName, "s1", args)
		wantErr(t, err, "Host header")
	}
	for _, req := range b.requests() {
		t.Errorf("a request with a foreign Host header was sent:\n%s", req)
	}
	u, _ := url.Parse(b.URL)
	if _, err := call(t, w, HTTPRequestName, "s1", obj{"url": b.URL + "/y", "headers": obj{"Host": strings.ToUpper(u.Host), "X-Api-Key": "${secret:T}"}}); err != nil {
		t.Fatalf("a Host header naming the URL's host: %v", err)
	}
	if reqs := b.requests(); len(reqs) != 1 || !strings.Contains(reqs[0], "Host: "+u.Host) {
		t.Errorf("requests: %q", reqs)
	}
}

// TestHostsThatIDNARefusesAreRefused: a URL whose host does not survive
// IDNA Lookup is refused before anything is resolved or dialled, with a
// message that says why, by every tool that takes a URL.
func TestHostsThatIDNARefusesAreRefused(t *testing.T) {
	ws, err := builtin.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	deps := testDeps(newFakeClock())
	deps.Workspace = ws
	w := newWeb(t, deps)
	for _, host := range []string{"xn--zz.example", "a..b.example", "exa\u200dmple.example", "1.2.3.4.5", "under_score.example"} {
		for _, tc := range []struct {
			tool string
			args obj
		}{
			{HTTPRequestName, obj{"url": "http://" + host + "/"}},
			{FetchPageName, obj{"url": "http://" + host + "/"}},
			{DownloadFileName, obj{"url": "http://" + host + "/", "path": "f.txt"}},
		} {
			_, err := call(t, w, tc.tool, "s1", tc.args)
			if err == nil || !strings.Contains(err.Error(), "not a valid host name") {
				t.Errorf("%s %q: %v; want a refusal saying the host is not a valid host name", tc.tool, host, err)
			}
		}
	}
}

// TestForwardingHeadersStayOffSecretBearingRequests: a proxy in front of
// the secret's host may route by X-Forwarded-Host, Forwarded or another
// forwarding header as a virtual host routes by Host, so a request that
// carries a secret (in its URL, a header or its body) refuses every
// forwarding header the model sets; a request without a secret may send
// them.
func TestForwardingHeadersStayOffSecretBearingRequests(t *testing.T) {
	b := newRecorder(t)
	deps := testDeps(newFakeClock())
	deps.Secrets = boundSecrets(t, "T", tokenValue, origin(t, b.URL))
	w := newWeb(t, deps)
	for _, h := range []string{"X-Forwarded-Host", "x-forwarded-host", "Forwarded", "X-Forwarded-For", "X-Forwarded-Proto",
		"X-Forwarded-Port", "X-Forwarded-Prefix", "X-Forwarded-Server", "X-Original-Host", "X-Original-URL", "X-Rewrite-URL", "X-Host"} {
		for _, args := range []obj{
			{"url": b.URL + "/x", "headers": obj{h: "admin.internal", "X-Api-Key": "${secret:T}"}},
			{"url": b.URL + "/x?k=${secret:T}", "headers": obj{h: "for=1.2.3.4;host=admin.internal"}},
			{"url": b.URL + "/x", "method": "POST", "body": "k=${secret:T}", "headers": obj{h: "admin.internal"}},
		} {
			_, err := call(t, w, HTTPRequestName, "s1", args)
			wantErr(t, err, "forwarding header")
		}
	}
	for _, req := range b.requests() {
		t.Errorf("a secret-bearing request with a forwarding header was sent:\n%s", req)
	}
	if _, err := call(t, w, HTTPRequestName, "s1", obj{"url": b.URL + "/y", "headers": obj{"X-Forwarded-For": "10.0.0.1"}}); err != nil {
		t.Fatalf("a forwarding header on a request without a secret: %v", err)
	}
	if reqs := b.requests(); len(reqs) != 1 || !strings.Contains(reqs[0], "X-Forwarded-For: 10.0.0.1") {
		t.Errorf("requests: %q", reqs)
	}
}
