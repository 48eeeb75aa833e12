package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit/internal/hostform"
)

// Defaults of the outbound policy.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultMaxBytes     = 5 << 20
	DefaultMaxRedirects = 5
	DefaultUserAgent    = "tooldispatch/1 (agent web tools)"
	// maxHeaderBytes caps the response headers of one request.
	maxHeaderBytes = 1 << 20
)

// Sentinel errors of the package; match them with errors.Is.
var (
	// ErrBlockedAddress: the policy refuses to connect to the address
	// (loopback, private, link-local, multicast, unspecified, metadata or
	// reserved), or the URL names such an address.
	ErrBlockedAddress = errors.New("web: address not allowed")
	// ErrScheme: the URL's scheme is not allowed (only http and https by
	// default).
	ErrScheme = errors.New("web: scheme not allowed")
	// ErrTooManyRedirects: a redirect chain is longer than the policy allows.
	ErrTooManyRedirects = errors.New("web: too many redirects")
	// ErrClosed: the tools were closed.
	ErrClosed = errors.New("web: closed")
)

// Policy is the outbound-request policy every web tool goes through. The
// zero value is not usable: start from DefaultPolicy or Config.Policy.
type Policy struct {
	// Timeout bounds one request: connecting, sending, and reading the
	// whole response.
	Timeout time.Duration
	// MaxBytes caps the bytes of a response body that are read; the rest is
	// not read and the result says it was cut.
	MaxBytes int64
	// MaxRedirects is how many redirects one request may follow; a longer
	// chain fails with ErrTooManyRedirects.
	MaxRedirects int
	// AllowLoopback allows loopback addresses (127.0.0.0/8, ::1) and the
	// name localhost.
	AllowLoopback bool
	// AllowPrivate allows private addresses: 10/8, 172.16/12, 192.168/16,
	// 100.64/10 (carrier-grade NAT), 198.18/15, fc00::/7. Link-local,
	// multicast, unspecified, reserved and cloud-metadata addresses stay
	// refused.
	AllowPrivate bool
	// Schemes are the allowed URL schemes, lower case; default http, https.
	Schemes []string
	// UserAgent is sent with every request that does not set its own.
	UserAgent string
}

// DefaultPolicy returns the default policy: 30 s, 5 MiB, 5 redirects,
// http and https, public addresses only.
func DefaultPolicy() Policy {
	return Policy{
		Timeout:      DefaultTimeout,
		MaxBytes:     DefaultMaxBytes,
		MaxRedirects: DefaultMaxRedirects,
		Schemes:      []string{"http", "https"},
		UserAgent:    DefaultUserAgent,
	}
}

// Validate names the first bad field.
func (p Policy) Validate() error {
	switch {
	case p.Timeout <= 0:
		return fmt.Errorf("web: Policy.Timeout must be positive, got %v", p.Timeout)
	case p.MaxBytes <= 0:
		return fmt.Errorf("web: Policy.MaxBytes must be positive, got %d", p.MaxBytes)
	case p.MaxRedirects < 0:
		return fmt.Errorf("web: Policy.MaxRedirects must not be negative, got %d", p.MaxRedirects)
	case len(p.Schemes) == 0:
		return errors.New("web: Policy.Schemes is empty")
	}
	for _, s := range p.Schemes {
		if s != "http" && s != "https" {
			return fmt.Errorf("web: Policy.Schemes: %q is not supported (http, https)", s)
		}
	}
	return nil
}

// BlockedError says which address the policy refused and why. It matches
// ErrBlockedAddress.
type BlockedError struct {
	Addr   string // the address or host name refused
	Reason string // e.g. "a private address"
	// Setting names the configuration field that would allow it, if any.
	Setting string
}

// Error says what was refused, why, and which setting would allow it.
func (e *BlockedError) Error() string {
	s := fmt.Sprintf("refusing to connect to %s: %s", e.Addr, e.Reason)
	if e.Setting != "" {
		s += " (the operator can allow these with " + e.Setting + ")"
	} else {
		s += " (never allowed)"
	}
	return s
}

// Is makes a BlockedError match ErrBlockedAddress.
func (e *BlockedError) Is(target error) bool { return target == ErrBlockedAddress }

// Address ranges the policy knows.
var (
	thisNetwork  = netip.MustParsePrefix("0.0.0.0/8")
	carrierNAT   = netip.MustParsePrefix("100.64.0.0/10")
	benchmarking = netip.MustParsePrefix("198.18.0.0/15")
	ietfProtocol = netip.MustParsePrefix("192.0.0.0/24")
	reserved4    = netip.MustParsePrefix("240.0.0.0/4") // includes 255.255.255.255
	ipv4Compat   = netip.MustParsePrefix("::/96")
	nat64        = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local   = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour    = netip.MustParsePrefix("2002::/16")
	teredo       = netip.MustParsePrefix("2001::/32")
	discard6     = netip.MustParsePrefix("100::/64")
	siteLocal6   = netip.MustParsePrefix("fec0::/10")

	// metadata are cloud instance-metadata endpoints outside the
	// link-local range, refused even when private addresses are allowed.
	metadata = []netip.Addr{
		netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack (link-local anyway)
		netip.MustParseAddr("fd00:ec2::254"),   // AWS IPv6
		netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	}
)

// CheckIP reports whether the policy allows connecting to ip; the error is
// a *BlockedError.
func (p Policy) CheckIP(ip netip.Addr) error {
	if !ip.IsValid() {
		return &BlockedError{Addr: "an invalid address", Reason: "not an IP address"}
	}
	ip = ip.Unmap().WithZone("")
	blocked := func(reason, setting string) error {
		return &BlockedError{Addr: ip.String(), Reason: reason, Setting: setting}
	}
	// IPv6 forms that carry an IPv4 address are judged by that address.
	if ip.Is6() && (nat64.Contains(ip) || sixToFour.Contains(ip)) {
		b := ip.As16()
		var v4 netip.Addr
		if nat64.Contains(ip) {
			v4 = netip.AddrFrom4([4]byte(b[12:16]))
		} else {
			v4 = netip.AddrFrom4([4]byte(b[2:6]))
		}
		if err := p.CheckIP(v4); err != nil {
			var be *BlockedError
			if errors.As(err, &be) {
				return blocked(be.Reason+" embedded in an IPv6 address", be.Setting)
			}
			return err
		}
		return nil
	}
	switch {
	case slices.Contains(metadata, ip):
		return blocked("a cloud metadata address", "")
	case ip.IsUnspecified() || thisNetwork.Contains(ip):
		return blocked("an unspecified address", "")
	case ip.IsLoopback():
		if p.AllowLoopback {
			return nil
		}
		return blocked("a loopback address", "allow_loopback")
	case ip.Is6() && ipv4Compat.Contains(ip):
		return blocked("a deprecated IPv4-compatible IPv6 address", "")
	case ip.IsMulticast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast():
		return blocked("a multicast address", "")
	case ip.IsLinkLocalUnicast():
		return blocked("a link-local address", "")
	case ip.IsPrivate() || carrierNAT.Contains(ip) || benchmarking.Contains(ip) ||
		siteLocal6.Contains(ip) || nat64Local.Contains(ip):
		if p.AllowPrivate {
			return nil
		}
		return blocked("a private address", "allow_private")
	case reserved4.Contains(ip) || ietfProtocol.Contains(ip) || teredo.Contains(ip) || discard6.Contains(ip):
		return blocked("a reserved address", "")
	}
	return nil
}

// CheckURL reports whether the policy allows requesting u, before any
// name is resolved (see Target).
func (p Policy) CheckURL(u *url.URL) error {
	_, err := p.Target(u)
	return err
}

// Target returns u with its host in the one form every check and the
// dialer use (hostform: IDNA Lookup, lower case, no trailing dot, canonical
// IP addresses), checked against the policy: the scheme, a host, and the
// host itself when it is an IP address or a localhost name. Addresses
// behind names are checked again when connecting. A request must be sent
// to the returned URL, never to u, so that the host checked is the host
// dialled; a host that does not survive IDNA Lookup is refused.
func (p Policy) Target(u *url.URL) (*url.URL, error) {
	scheme := strings.ToLower(u.Scheme)
	if !slices.Contains(p.Schemes, scheme) {
		if scheme == "" {
			return nil, fmt.Errorf("%w: the URL has no scheme; write it as https://…", ErrScheme)
		}
		return nil, fmt.Errorf("%w: %q (allowed: %s)", ErrScheme, u.Scheme, strings.Join(p.Schemes, ", "))
	}
	if u.Hostname() == "" {
		return nil, errors.New("the URL has no host")
	}
	n, err := hostform.URL(u)
	if err != nil {
		return nil, fmt.Errorf("%w; nothing was sent", err)
	}
	host := n.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := p.CheckIP(ip); err != nil {
			return nil, err
		}
		return n, nil
	}
	if (host == "localhost" || strings.HasSuffix(host, ".localhost")) && !p.AllowLoopback {
		return nil, &BlockedError{Addr: host, Reason: "a loopback name", Setting: "allow_loopback"}
	}
	return n, nil
}

// control is the dialer's Control hook: it runs after the name was resolved
// and before connect, and refuses addresses the policy does not allow.
func (p Policy) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &BlockedError{Addr: address, Reason: "not an IP address and port"}
	}
	return p.CheckIP(ap.Addr())
}

// redirectKey marks a request whose redirects must stay on its origin
// (it carries credentials that must not reach another host).
type redirectKey struct{}

// withSameOriginRedirects marks ctx so that requests made with it follow
// redirects only to the same scheme, host and port; a redirect elsewhere is
// returned as the response instead.
func withSameOriginRedirects(ctx context.Context) context.Context {
	return context.WithValue(ctx, redirectKey{}, true)
}

// checkRedirect is the client's redirect policy. The redirect is sent to
// its target in the one host form (Target), like every first request.
func (p Policy) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > p.MaxRedirects {
		return fmt.Errorf("%w: stopped after %d (the limit is %d)", ErrTooManyRedirects, len(via)-1, p.MaxRedirects)
	}
	n, err := p.Target(req.URL)
	if err != nil {
		return fmt.Errorf("a redirect led to %s: %w", req.URL.Redacted(), err)
	}
	req.URL = n
	if same, _ := req.Context().Value(redirectKey{}).(bool); same && !sameOrigin(req.URL, via[0].URL) {
		return http.ErrUseLastResponse
	}
	return nil
}

func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(hostPort(a), hostPort(b))
}

// hostPort returns the host and the explicit or default port of u (whose
// host is in its one form, see Target).
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// NewClient returns an HTTP client that enforces the policy: the dial
// check, the redirect limit and checks, no proxy, and no connection kept
// between requests (each request is checked on a connection of its own).
// It dials only hosts in their one form (Target): a request built from a
// URL that did not go through Target is refused before any name is
// resolved. Timeout and MaxBytes are applied by the caller per request.
func (p Policy) NewClient() *http.Client {
	dialer := &net.Dialer{Timeout: p.Timeout, Control: p.control}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialFormOnly(dialer.DialContext),
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    p.Timeout,
		ResponseHeaderTimeout:  p.Timeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: maxHeaderBytes,
		DisableKeepAlives:      true,
	}
	return &http.Client{Transport: tr, CheckRedirect: p.checkRedirect}
}

// dialFormOnly lets dial connect only to hosts already in their one form,
// so that no check can have looked at a host other than the one dialled.
func dialFormOnly(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil || !hostform.IsForm(host) {
			return nil, &BlockedError{Addr: addr, Reason: "its host is not in the form the checks looked at"}
		}
		return dial(ctx, network, addr)
	}
}
