package web

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestCheckIP(t *testing.T) {
	def := DefaultPolicy()
	loop := DefaultPolicy()
	loop.AllowLoopback = true
	priv := DefaultPolicy()
	priv.AllowPrivate = true
	tests := []struct {
		addr                 string
		dflt, looped, privOK bool // allowed by the default, loopback and private policies
		reason               string
	}{
		{addr: "93.184.216.34", dflt: true, looped: true, privOK: true},
		{addr: "2606:4700::6810:85e5", dflt: true, looped: true, privOK: true},
		{addr: "127.0.0.1", looped: true, reason: "loopback"},
		{addr: "127.8.9.10", looped: true, reason: "loopback"},
		{addr: "::1", looped: true, reason: "loopback"},
		{addr: "::ffff:127.0.0.1", looped: true, reason: "loopback"},
		{addr: "10.0.0.1", privOK: true, reason: "private"},
		{addr: "172.16.5.4", privOK: true, reason: "private"},
		{addr: "192.168.1.1", privOK: true, reason: "private"},
		{addr: "100.64.0.1", privOK: true, reason: "private"},
		{addr: "fd12:3456::1", privOK: true, reason: "private"},
		{addr: "::ffff:10.0.0.1", privOK: true, reason: "private"},
		{addr: "64:ff9b::a00:1", privOK: true, reason: "private address embedded"},
		{addr: "2002:a00:1::1", privOK: true, reason: "private address embedded"},
		{addr: "169.254.169.254", reason: "metadata"},
		{addr: "fd00:ec2::254", reason: "metadata"},
		{addr: "100.100.100.200", reason: "metadata"},
		{addr: "169.254.1.1", reason: "link-local"},
		{addr: "fe80::1", reason: "link-local"},
		{addr: "0.0.0.0", reason: "unspecified"},
		{addr: "0.1.2.3", reason: "unspecified"},
		{addr: "::", reason: "unspecified"},
		{addr: "224.0.0.1", reason: "multicast"},
		{addr: "ff02::1", reason: "multicast"},
		{addr: "255.255.255.255", reason: "reserved"},
		{addr: "240.0.0.1", reason: "reserved"},
		{addr: "64:ff9b::7f00:1", looped: true, reason: "loopback address embedded"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			ip := netip.MustParseAddr(tt.addr)
			for _, c := range []struct {
				name  string
				p     Policy
				allow bool
			}{{"default", def, tt.dflt}, {"loopback", loop, tt.looped}, {"private", priv, tt.privOK}} {
				err := c.p.CheckIP(ip)
				if c.allow && err != nil {
					t.Errorf("%s policy refused: %v", c.name, err)
				}
				if !c.allow {
					if !errors.Is(err, ErrBlockedAddress) {
						t.Errorf("%s policy: err = %v, want ErrBlockedAddress", c.name, err)
					} else if !strings.Contains(err.Error(), tt.reason) {
						t.Errorf("%s policy: %q does not say %q", c.name, err, tt.reason)
					}
				}
			}
		})
	}
}

// The dial hook refuses before connect(): it is handed the resolved address
// and returns an error, so no packet leaves for these addresses.
func TestDialControlRefusesResolvedAddress(t *testing.T) {
	p := DefaultPolicy()
	for _, addr := range []string{"10.0.0.1:80", "169.254.169.254:80", "[::1]:443", "127.0.0.1:8080", "[fe80::1%eth0]:80", "0.0.0.0:80"} {
		if err := p.control("tcp", addr, nil); !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("control(%s) = %v, want ErrBlockedAddress", addr, err)
		}
	}
	if err := p.control("tcp4", "93.184.216.34:443", nil); err != nil {
		t.Errorf("control refused a public address: %v", err)
	}
	if err := p.control("tcp", "not-an-address", nil); !errors.Is(err, ErrBlockedAddress) {
		t.Errorf("control accepted an unparsable address: %v", err)
	}
}

// A host name is checked once resolved, at connect time: the client alone
// (without the URL pre-check the tools do) refuses localhost by its
// address, and the server sees nothing.
func TestClientChecksResolvedNames(t *testing.T) {
	s := newSite(t)
	c := DefaultPolicy().NewClient()
	u, _ := url.Parse(s.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost:"+u.Port()+"/article", nil)
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatal("the default policy connected to localhost")
	}
	if !errors.Is(err, ErrBlockedAddress) {
		t.Fatalf("err = %v, want ErrBlockedAddress", err)
	}
	if n := s.count("/article"); n != 0 {
		t.Errorf("the server saw %d requests", n)
	}
}

// The default policy refuses SSRF targets: IP literals before any dial,
// names when their address is known. No traffic reaches a non-loopback
// address, and the loopback server sees nothing.
func TestDefaultPolicyRefusesSSRF(t *testing.T) {
	s := newSite(t)
	u, _ := url.Parse(s.URL)
	port := u.Port()
	w := newWeb(t, Deps{Config: Config{Timeout: 5 * time.Second}})
	tests := []struct {
		url, reason string
	}{
		{"http://10.0.0.1/", "private"},
		{"http://169.254.169.254/latest/meta-data/", "metadata"},
		{"http://[::1]:" + port + "/article", "loopback"},
		{"http://127.0.0.1:" + port + "/article", "loopback"},
		{"http://[::ffff:127.0.0.1]:" + port + "/article", "loopback"},
		{"http://0.0.0.0:" + port + "/article", "unspecified"},
		{"http://localhost:" + port + "/article", "loopback"},
		{"http://LOCALHOST.:" + port + "/article", "loopback"},
		{"http://[fd00:ec2::254]/", "metadata"},
		{"file:///etc/passwd", "scheme"},
		{"gopher://127.0.0.1/", "scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			for _, name := range []string{FetchPageName, HTTPRequestName} {
				_, err := call(t, w, name, "s1", obj{"url": tt.url})
				wantErr(t, err, tt.reason)
			}
		})
	}
	if n := s.count("/article"); n != 0 {
		t.Errorf("the loopback server saw %d requests", n)
	}
}

func TestRedirects(t *testing.T) {
	s := newSite(t)
	other := newSite(t)
	deps := testDeps(newFakeClock())
	deps.Config.MaxRedirects = 3
	w := newWeb(t, deps)

	// Redirects between loopback servers are followed when loopback is allowed.
	res, err := call(t, w, FetchPageName, "s1", obj{"url": s.URL + "/to?url=" + url.QueryEscape(other.URL+"/redirect/1")})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "URL: "+other.URL+"/article", "Redirected from: "+s.URL+"/to?url=", "Growing Tomatoes")

	tests := []struct {
		name, path string
		want       []string
	}{
		{name: "chain longer than the limit", path: "/redirect/5", want: []string{"too many redirects", "stopped after 3"}},
		{name: "to the metadata address", path: "/to?url=" + url.QueryEscape("http://169.254.169.254/latest/meta-data/"),
			want: []string{"a redirect led to http://169.254.169.254/latest/meta-data/", "cloud metadata"}},
		{name: "to a private address", path: "/to?url=" + url.QueryEscape("http://10.0.0.1/admin"), want: []string{"private address"}},
		{name: "to link-local IPv6", path: "/to?url=" + url.QueryEscape("http://[fe80::1]/"), want: []string{"link-local"}},
		{name: "to another scheme", path: "/to?url=" + url.QueryEscape("ftp://files.example.com/x"), want: []string{"scheme"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, w, FetchPageName, "s1", obj{"url": s.URL + tt.path})
			wantErr(t, err, tt.want...)
		})
	}
	if n2, n1 := s.count("/redirect/2"), s.count("/redirect/1"); n2 != 1 || n1 != 0 {
		t.Errorf("the 5-redirect chain reached /redirect/2 %d times and /redirect/1 %d times, want 1 and 0 (stopped after 3)", n2, n1)
	}

	// Without loopback, the default policy refuses a redirect to loopback.
	loopOnly := DefaultPolicy()
	err = loopOnly.checkRedirect(mustRequest(t, "http://127.0.0.1:1/x"), []*http.Request{mustRequest(t, "http://example.com/")})
	if !errors.Is(err, ErrBlockedAddress) {
		t.Errorf("redirect to loopback under the default policy: %v", err)
	}
}

// A request that carries a credential follows redirects only on its own
// origin: the 3xx answer comes back instead of the credential going
// elsewhere.
func TestCredentialsStayOnTheirOrigin(t *testing.T) {
	s := newSite(t)
	other := newSite(t)
	w := newWeb(t, testDeps(newFakeClock()))
	res, err := call(t, w, HTTPRequestName, "s1", obj{
		"url":     s.URL + "/to?url=" + url.QueryEscape(other.URL+"/echo"),
		"headers": obj{"X-Api-Key": "k-123456"},
	})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "HTTP 302 Found", "Location: "+other.URL+"/echo")
	if n := other.count("/echo"); n != 0 {
		t.Errorf("the credential followed a redirect to another origin (%d requests)", n)
	}
	// Without a credential the redirect is followed.
	res, err = call(t, w, HTTPRequestName, "s1", obj{"url": s.URL + "/to?url=" + url.QueryEscape(other.URL+"/echo")})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "HTTP 200 OK", "GET /echo")
}

func TestTimeout(t *testing.T) {
	s := newSite(t)
	deps := testDeps(newFakeClock())
	deps.Config.Timeout = 200 * time.Millisecond
	w := newWeb(t, deps)
	for _, name := range []string{FetchPageName, HTTPRequestName} {
		_, err := call(t, w, name, "s1", obj{"url": s.URL + "/slow"})
		wantErr(t, err, "timed out after 200ms")
	}
	// The caller's own context ending is reported as such.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := callCtx(ctx, t, w, HTTPRequestName, "s1", obj{"url": s.URL + "/slow", "method": "POST"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("canceled call: %v", err)
	}
}

func TestHugeBodyIsCapped(t *testing.T) {
	s := newSite(t)
	deps := testDeps(newFakeClock())
	deps.Config.MaxBytes = 64 << 10
	w := newWeb(t, deps)

	res, err := call(t, w, FetchPageName, "s1", obj{"url": s.URL + "/huge"})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "larger than 64.0 KiB; only its start was read")

	res, err = call(t, w, HTTPRequestName, "s1", obj{"url": s.URL + "/huge", "max_chars": 200000})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "[body cut at the 64.0 KiB response limit]")
	if len(res.Content) > 70<<10 {
		t.Errorf("content is %d bytes", len(res.Content))
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Policy)
		want string
	}{
		{"timeout", func(p *Policy) { p.Timeout = 0 }, "Timeout"},
		{"max bytes", func(p *Policy) { p.MaxBytes = -1 }, "MaxBytes"},
		{"redirects", func(p *Policy) { p.MaxRedirects = -1 }, "MaxRedirects"},
		{"schemes", func(p *Policy) { p.Schemes = nil }, "Schemes"},
		{"ftp", func(p *Policy) { p.Schemes = []string{"ftp"} }, "ftp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultPolicy()
			tt.edit(&p)
			wantErr(t, p.Validate(), tt.want)
		})
	}
	if err := DefaultPolicy().Validate(); err != nil {
		t.Errorf("default policy: %v", err)
	}
}

func mustRequest(t *testing.T, u string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
