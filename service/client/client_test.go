package client

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/service"
)

// fakeMember answers session requests as a member would: it names owner
// in the header and, when redirect is set and it is not the owner,
// answers 307 there (unless already redirected).
type fakeMember struct {
	srv      *httptest.Server
	owner    atomic.Pointer[string]
	redirect bool
	served   atomic.Int64
	bodies   chan string
}

func newFakeMember(t *testing.T, redirect bool) *fakeMember {
	m := &fakeMember{redirect: redirect, bodies: make(chan string, 16)}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner := *m.owner.Load()
		w.Header().Set(service.OwnerHeader, owner)
		if m.redirect && owner != m.srv.URL && !r.URL.Query().Has(service.RedirectedParam) {
			w.Header().Set("Location", owner+r.URL.Path+"?"+service.RedirectedParam+"=1")
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		body, _ := io.ReadAll(r.Body)
		m.bodies <- r.URL.Path + " " + string(body)
		m.served.Add(1)
		w.Write([]byte(`{"turn":1}`))
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *fakeMember) setOwner(u string) { m.owner.Store(&u) }

func TestClientFollowsTheOwnerHeader(t *testing.T) {
	a, b := newFakeMember(t, false), newFakeMember(t, false)
	a.setOwner(b.srv.URL)
	b.setOwner(b.srv.URL)
	c, err := New(Options{Members: []string{a.srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		res, err := c.Turn(ctx, "s 1", map[string]any{"turn_id": "t"})
		if err != nil || res.Status != http.StatusOK {
			t.Fatalf("turn %d: %+v %v", i, res, err)
		}
	}
	if a.served.Load() != 1 || b.served.Load() != 2 {
		t.Errorf("served by a %d, by b %d; want the first by a, the others by the owner b", a.served.Load(), b.served.Load())
	}
	if got := <-a.bodies; got != `/v1/sessions/s%201/turns {"turn_id":"t"}` && got != `/v1/sessions/s 1/turns {"turn_id":"t"}` {
		t.Errorf("request %q", got)
	}
	if c.Owner("s 1") != b.srv.URL {
		t.Errorf("owner %q, want %q", c.Owner("s 1"), b.srv.URL)
	}
}

func TestClientFollowsARedirectWithItsBody(t *testing.T) {
	a, b := newFakeMember(t, true), newFakeMember(t, true)
	a.setOwner(b.srv.URL)
	b.setOwner(b.srv.URL)
	c, err := New(Options{Members: []string{a.srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Answer(context.Background(), "s", "call 1", "yes")
	if err != nil || res.Status != http.StatusOK || res.Member != b.srv.URL {
		t.Fatalf("answer: %+v %v", res, err)
	}
	if got := <-b.bodies; !strings.HasSuffix(got, `{"text":"yes"}`) || !strings.Contains(got, "/answer/call") {
		t.Errorf("the owner got %q", got)
	}
	if st := c.Stats(); st.Redirects != 1 || a.served.Load() != 0 {
		t.Errorf("stats %+v, a served %d", st, a.served.Load())
	}
	// The owner is remembered: no redirect the next time.
	if _, err := c.Confirm(context.Background(), "s", "c2", true, "h", ""); err != nil || c.Stats().Redirects != 1 {
		t.Errorf("confirm: %v, %+v", err, c.Stats())
	}
}

// TestClientFallsBackWhenTheOwnerIsGone: a remembered owner that refuses
// connections is forgotten and the next member serves the request.
func TestClientFallsBackWhenTheOwnerIsGone(t *testing.T) {
	a := newFakeMember(t, false)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there any more
	a.setOwner(gone)
	c, err := New(Options{Members: []string{gone, a.srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	c.remember("s", gone)
	res, err := c.Turn(context.Background(), "s", map[string]any{})
	if err != nil || res.Status != http.StatusOK || res.Member != a.srv.URL {
		t.Fatalf("turn: %+v %v", res, err)
	}
	if st := c.Stats(); st.Fallbacks != 1 {
		t.Errorf("stats %+v, want one fallback", st)
	}
	// Every member gone: an error naming it, not a hang.
	a.srv.Close()
	if _, err := c.Turn(context.Background(), "s", map[string]any{}); err == nil || !strings.Contains(err.Error(), "no member") {
		t.Errorf("all members gone: %v", err)
	}
}

func TestNewRefusesBadMembers(t *testing.T) {
	for _, members := range [][]string{nil, {"m1:8080"}, {"ftp://m1"}} {
		if _, err := New(Options{Members: members}); err == nil {
			t.Errorf("New(%q) accepted", members)
		}
	}
}

// TestClientKeepsItsTokenOffPlainHTTP: an https member naming a plain-http
// owner (in the header or a redirect) is not followed there, so the bearer
// token and the body never go out in clear; an owner that is no http(s)
// address is not remembered, so it cannot wedge the session.
func TestClientKeepsItsTokenOffPlainHTTP(t *testing.T) {
	var clearTokens atomic.Int64
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			clearTokens.Add(1)
		}
		w.Write([]byte(`{"turn":1}`))
	}))
	t.Cleanup(plain.Close)
	for _, redirect := range []bool{false, true} {
		owner := plain.URL
		tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(service.OwnerHeader, owner)
			if redirect {
				w.Header().Set("Location", owner+r.URL.Path)
				w.WriteHeader(http.StatusTemporaryRedirect)
				return
			}
			w.Write([]byte(`{"turn":1}`))
		}))
		t.Cleanup(tls.Close)
		c, err := New(Options{Members: []string{tls.URL}, Token: "tok", HTTP: tls.Client()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		for i := 0; i < 2; i++ {
			if _, err := c.Turn(ctx, "s", map[string]any{"turn_id": "t"}); err != nil {
				t.Fatalf("redirect %v, turn %d: %v", redirect, i, err)
			}
		}
		cancel()
		if got := c.Owner("s"); got != "" {
			t.Errorf("redirect %v: owner %q remembered, want none (a downgrade to http)", redirect, got)
		}
		owner = "ftp://elsewhere"
		if _, err := c.Turn(context.Background(), "s2", nil); err != nil {
			t.Fatalf("redirect %v, a malformed owner: %v", redirect, err)
		}
		if got := c.Owner("s2"); got != "" {
			t.Errorf("redirect %v: malformed owner %q remembered", redirect, got)
		}
	}
	if n := clearTokens.Load(); n != 0 {
		t.Errorf("the bearer token went over plain http %d times", n)
	}
}
