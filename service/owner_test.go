package service

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// fakePlacement places the sessions it names on other members; every other
// session is this member's.
type fakePlacement struct {
	self      string
	others    map[string]string // session → owner's address
	forwarded atomic.Uint64
}

func (p *fakePlacement) Owner(_ context.Context, session string) (string, bool) {
	if u, ok := p.others[session]; ok {
		return u, false
	}
	return p.self, true
}

func (p *fakePlacement) Forwarded() uint64 { return p.forwarded.Load() }

// noRedirects makes the fixture's client return redirects instead of
// following them.
func noRedirects(f *fixture) {
	f.client = &http.Client{Transport: f.hs.Client().Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// TestOwnerHeaderOnSessionRequests: a cluster member's answer to every
// session request names the session's owner, whether it owns it or not,
// and it runs the request either way (no redirect mode).
func TestOwnerHeaderOnSessionRequests(t *testing.T) {
	p := &fakePlacement{self: "http://self.test:1", others: map[string]string{"far": "http://owner.test:2/agent"}}
	f := newFixture(t, fixtureOpts{cluster: p})
	noRedirects(f)
	for _, tc := range []struct{ session, want string }{{"near", p.self}, {"far", "http://owner.test:2/agent"}} {
		resp, body := f.do("POST", "/v1/sessions/"+tc.session+"/turns", turn("r", "all", call(t, "c1", "calculate", map[string]any{"expression": "6*7"})))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("turn on %s: %d %s", tc.session, resp.StatusCode, body)
		}
		for _, req := range []struct{ method, path string }{
			{"POST", "/v1/sessions/" + tc.session + "/turns"},
			{"GET", "/v1/sessions/" + tc.session},
			{"POST", "/v1/sessions/" + tc.session + "/answer/nope"},
			{"POST", "/v1/sessions/" + tc.session + "/confirm/nope"},
			{"POST", "/v1/sessions/" + tc.session + "/client_result/nope"},
			{"DELETE", "/v1/sessions/" + tc.session + "/runs/r"},
		} {
			resp, _ := f.do(req.method, req.path, map[string]any{})
			if got := resp.Header.Get(OwnerHeader); got != tc.want {
				t.Errorf("%s %s: %s = %q, want %q", req.method, req.path, OwnerHeader, got, tc.want)
			}
			if resp.StatusCode == http.StatusTemporaryRedirect {
				t.Errorf("%s %s redirected without redirect mode", req.method, req.path)
			}
		}
	}
	// Requests that name no session carry no owner.
	resp, _ := f.do("GET", "/v1/sessions", nil)
	if got := resp.Header.Get(OwnerHeader); got != "" {
		t.Errorf("GET /v1/sessions: %s = %q, want none", OwnerHeader, got)
	}
	_, metrics := f.do("GET", "/metrics", nil)
	if !strings.Contains(string(metrics), "tooldispatch_cluster_forwarded_total") {
		t.Error("the metrics have no tooldispatch_cluster_forwarded_total")
	}
}

// TestOwnerRedirect: in redirect mode a request for a session another
// member owns is answered 307 to the owner without running; a request a
// member already redirected is served wherever it lands (an owner that
// changed in between cannot make a loop); the owner's own sessions and
// the operator page's requests are served.
func TestOwnerRedirect(t *testing.T) {
	const token = "s3cret-token"
	p := &fakePlacement{self: "http://self.test:1", others: map[string]string{"far": "http://owner.test:2/agent", "moved": "http://owner.test:3"}}
	f := newFixture(t, fixtureOpts{cluster: p, redirect: true, token: token})
	noRedirects(f)
	calc := turn("r", "all", call(t, "c1", "calculate", map[string]any{"expression": "6*7"}))

	resp, body := f.do("POST", "/v1/sessions/far/turns?x=1", calc)
	if resp.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("turn on a session owned elsewhere: %d %s, want 307", resp.StatusCode, body)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	if loc.Scheme+"://"+loc.Host+loc.Path != "http://owner.test:2/agent/v1/sessions/far/turns" ||
		loc.Query().Get(RedirectedParam) != "1" || loc.Query().Get("x") != "1" {
		t.Errorf("Location = %s, want the owner's address, the same path and query, and %s=1", loc, RedirectedParam)
	}
	if got := resp.Header.Get(OwnerHeader); got != "http://owner.test:2/agent" {
		t.Errorf("%s = %q on the redirect", OwnerHeader, got)
	}
	// Nothing ran: the session has no turn here.
	if resp, body := f.do("GET", "/v1/sessions/far?"+RedirectedParam+"=1", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("after a redirect the session exists here: %d %s", resp.StatusCode, body)
	}

	// A redirected request is served even where the placement now names
	// another owner.
	resp, body = f.do("POST", "/v1/sessions/moved/turns?"+RedirectedParam+"=1", calc)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("redirected turn on a session owned elsewhere: %d %s, want 200 (served)", resp.StatusCode, body)
	}
	if got := resp.Header.Get(OwnerHeader); got != "http://owner.test:3" {
		t.Errorf("%s = %q on the served redirected turn", OwnerHeader, got)
	}

	// The owner's own session is served.
	if resp, body := f.do("POST", "/v1/sessions/near/turns", calc); resp.StatusCode != http.StatusOK {
		t.Errorf("turn on an owned session: %d %s", resp.StatusCode, body)
	}

	// The operator page (its cookie, no bearer token) is never sent away.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	f.token = ""
	h := f.pageHeaders()
	h.Set("Cookie", f.login(t).String())
	resp, body = f.request(ctx, "GET", "/v1/sessions/far", nil, h)
	if resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusUnauthorized {
		t.Errorf("the page's request was answered %d %s, want it served", resp.StatusCode, body)
	}
	f.token = token
	resp, body = f.request(ctx, "GET", "/v1/sessions/far", nil, http.Header{"Sec-Fetch-Mode": {"cors"}})
	if resp.StatusCode == http.StatusTemporaryRedirect {
		t.Errorf("a browser's fetch was answered %d %s, want it served", resp.StatusCode, body)
	}

	_, metrics := f.do("GET", "/metrics", nil)
	if !strings.Contains(string(metrics), "tooldispatch_cluster_redirects_total 1") {
		t.Errorf("tooldispatch_cluster_redirects_total is not 1:\n%s", grepLines(string(metrics), "tooldispatch_cluster"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// leavingPlacement is a fakePlacement of a member that drains: it names
// each session's next owner.
type leavingPlacement struct {
	fakePlacement
	next string
}

func (p *leavingPlacement) Successor(context.Context, string) string { return p.next }

// TestShutdownNamesNextOwner: a cluster member that shuts down answers a
// new turn 503 naming the session's next owner (the header and the
// message), or in redirect mode 307 to it; nothing runs.
func TestShutdownNamesNextOwner(t *testing.T) {
	for _, redirect := range []bool{false, true} {
		p := &leavingPlacement{fakePlacement: fakePlacement{self: "http://self.test:1"}, next: "http://next.test:2"}
		f := newFixture(t, fixtureOpts{cluster: p, redirect: redirect})
		noRedirects(f)
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		if err := f.srv.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		resp, body := f.do("POST", "/v1/sessions/near/turns", turn("r", "all", call(t, "c1", "calculate", map[string]any{"expression": "6*7"})))
		if got := resp.Header.Get(OwnerHeader); got != p.next {
			t.Errorf("redirect %v: %s = %q, want the next owner %q", redirect, OwnerHeader, got, p.next)
		}
		switch {
		case redirect && (resp.StatusCode != http.StatusTemporaryRedirect || !strings.HasPrefix(resp.Header.Get("Location"), p.next+"/v1/sessions/near/turns?")):
			t.Errorf("redirect mode: %d Location %q, want 307 to the next owner", resp.StatusCode, resp.Header.Get("Location"))
		case !redirect && (resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "next owner is "+p.next)):
			t.Errorf("a turn while shutting down: %d %s, want 503 naming the next owner", resp.StatusCode, body)
		}
		if !redirect && resp.Header.Get("Retry-After") != drainRetryAfter {
			t.Errorf("a turn while shutting down: Retry-After %q, want %q (the next owner serves the session within about a second)", resp.Header.Get("Retry-After"), drainRetryAfter)
		}
	}
}
