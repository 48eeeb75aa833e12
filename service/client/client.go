// Package client is a small Go client of a tooldispatch cluster's HTTP
// service that talks to the member owning each session.
//
// Every member of a cluster (serve --cluster) takes every session request;
// a member that does not own the session forwards it to the owner over the
// cluster, which costs a round trip between members. A member names the
// owner in the Tooldispatch-Owner response header, and with redirect mode
// answers 307 to the owner instead of forwarding. The client remembers the
// owner of each session from either, sends the session's next requests
// there, and falls back to the other members when the owner cannot be
// reached (it left or died: the cluster moves its sessions).
//
// It knows the service only through HTTP: it imports no other package of
// the project but the header names of package service.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tooldispatch/tooldispatch/service"
)

// maxRedirects bounds the redirects followed for one request. A member
// never redirects a request another member redirected, so one is the most
// a healthy cluster gives.
const maxRedirects = 3

// ErrNoMember: no member could be reached.
var ErrNoMember = errors.New("client: no member of the cluster could be reached")

// Options configures a Client.
type Options struct {
	// Members are the base addresses of the members' services
	// (scheme://host[:port][/prefix]); at least one. Owners named by the
	// members are added as they are learnt (http or https addresses only,
	// and never plain http when named by an https member).
	Members []string
	// Token is sent as "Authorization: Bearer <token>" when set.
	Token string
	// HTTP is the client requests go through; http.DefaultClient when nil.
	// Its CheckRedirect is not used: the client follows redirects itself.
	HTTP *http.Client
}

// Client sends session requests to the member owning the session. Safe for
// concurrent use.
type Client struct {
	// immutable after New
	members []string
	token   string
	hc      *http.Client

	next atomic.Uint64 // the member a session without a known owner starts at

	mu     sync.Mutex
	owners map[string]string // guarded by mu: session → owner's address

	stats struct {
		requests, redirects, fallbacks, ownerChanges atomic.Uint64
	}
}

// New returns a client of the members in opts.
func New(opts Options) (*Client, error) {
	if len(opts.Members) == 0 {
		return nil, errors.New("client: Options.Members is empty")
	}
	c := &Client{token: opts.Token, owners: map[string]string{}}
	for _, m := range opts.Members {
		u, err := url.Parse(m)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("client: member %q is not an http or https address", m)
		}
		c.members = append(c.members, strings.TrimSuffix(m, "/"))
	}
	hc := http.DefaultClient
	if opts.HTTP != nil {
		hc = opts.HTTP
	}
	// The same transport and timeout, redirects left to the client.
	c.hc = &http.Client{Transport: hc.Transport, Jar: hc.Jar, Timeout: hc.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c, nil
}

// Response is a member's answer.
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Body is the response body.
	Body []byte
	// Member is the scheme://host of the member that answered.
	Member string
	// Owner is the owner the answer named ("" when none).
	Owner string
}

// Stats counts what the client did.
type Stats struct {
	// Requests sent, redirects followed, fallbacks to another member after
	// one could not be reached, and changes of a session's known owner.
	Requests, Redirects, Fallbacks, OwnerChanges uint64
}

// Stats returns the counts so far.
func (c *Client) Stats() Stats {
	return Stats{Requests: c.stats.requests.Load(), Redirects: c.stats.redirects.Load(),
		Fallbacks: c.stats.fallbacks.Load(), OwnerChanges: c.stats.ownerChanges.Load()}
}

// Owner returns the known owner of session ("" when none is known).
func (c *Client) Owner(session string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owners[session]
}

// Turn posts a turn (the JSON body of POST /v1/sessions/{session}/turns).
// Give the turn a turn_id: a turn whose connection broke after it was sent
// may be posted again with the same id, and the service answers with the
// turn it ran instead of running it twice. The client itself resends only
// requests no member received.
func (c *Client) Turn(ctx context.Context, session string, body any) (*Response, error) {
	return c.Do(ctx, http.MethodPost, session, "/turns", body)
}

// Confirm answers a confirmation (approve or deny, with the args_hash of
// its tool_confirm event and an optional reason).
func (c *Client) Confirm(ctx context.Context, session, callID string, approve bool, argsHash, reason string) (*Response, error) {
	body := map[string]any{"approve": approve, "args_hash": argsHash}
	if reason != "" {
		body["reason"] = reason
	}
	return c.Do(ctx, http.MethodPost, session, "/confirm/"+url.PathEscape(callID), body)
}

// Answer answers an ask_user question.
func (c *Client) Answer(ctx context.Context, session, callID, text string) (*Response, error) {
	return c.Do(ctx, http.MethodPost, session, "/answer/"+url.PathEscape(callID), map[string]any{"text": text})
}

// Do sends method /v1/sessions/{session}{rest} with body (JSON-encoded;
// nil for none) to the session's owner when it is known, else to a member;
// it follows a redirect to the owner and learns the owner from the
// answer. A member that cannot be reached is forgotten as the session's
// owner and the next member is tried. A non-2xx status is not an error:
// read Response.Status.
func (c *Client) Do(ctx context.Context, method, session, rest string, body any) (*Response, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("client: encoding the body: %w", err)
		}
	}
	path := "/v1/sessions/" + url.PathEscape(session) + rest
	start := c.Owner(session)
	tried := map[string]bool{}
	var lastErr error
	for attempt := 0; attempt <= len(c.members); attempt++ {
		base := start
		if base == "" || tried[base] {
			base = c.pick(tried)
		}
		if base == "" {
			break
		}
		tried[base] = true
		res, err := c.send(ctx, method, base+path, payload, session)
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil || !unreached(err) {
			return nil, err
		}
		// Nothing reached that member: forget it as the owner, try another.
		lastErr = err
		c.forget(session, base)
		c.stats.fallbacks.Add(1)
		start = ""
	}
	return nil, fmt.Errorf("%w: %v", ErrNoMember, lastErr)
}

// send sends one request to target, following redirects.
func (c *Client) send(ctx context.Context, method, target string, payload []byte, session string) (*Response, error) {
	for hop := 0; ; hop++ {
		var rd io.Reader
		if payload != nil {
			rd = bytes.NewReader(payload)
		}
		req, err := http.NewRequestWithContext(ctx, method, target, rd)
		if err != nil {
			return nil, err
		}
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		c.stats.requests.Add(1)
		resp, err := c.hc.Do(req)
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		owner := resp.Header.Get(service.OwnerHeader)
		if owner != "" && followable(req.URL, owner) {
			c.remember(session, owner)
		}
		if resp.StatusCode == http.StatusTemporaryRedirect && hop < maxRedirects {
			loc, err := resp.Location()
			if err == nil && followable(req.URL, loc.String()) {
				c.stats.redirects.Add(1)
				target = loc.String()
				continue
			}
		}
		return &Response{Status: resp.StatusCode, Body: data, Member: req.URL.Scheme + "://" + req.URL.Host, Owner: owner}, nil
	}
}

// followable reports whether the client may send a session's requests
// (with its token and body) to addr, named by the member at from: an http
// or https address, and never plain http named by an https member (the
// token would go out in clear). Anything else is not followed: the answer
// is returned as it is, and the session's owner stays unknown.
func followable(from *url.URL, addr string) bool {
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return from.Scheme != "https" || u.Scheme == "https"
}

// pick returns the next member not tried yet ("" when all were).
func (c *Client) pick(tried map[string]bool) string {
	n := uint64(len(c.members))
	first := c.next.Add(1)
	for i := uint64(0); i < n; i++ {
		if m := c.members[(first+i)%n]; !tried[m] {
			return m
		}
	}
	return ""
}

func (c *Client) remember(session, owner string) {
	owner = strings.TrimSuffix(owner, "/")
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owners[session] != owner {
		c.owners[session] = owner
		c.stats.ownerChanges.Add(1)
	}
}

func (c *Client) forget(session, base string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owners[session] == base {
		delete(c.owners, session)
	}
}

// unreached reports whether err means the request never reached a member
// (the connection was refused or could not be made), so that sending it
// to another member cannot run it twice.
func unreached(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
