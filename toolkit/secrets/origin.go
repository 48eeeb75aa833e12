package secrets

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/tooldispatch/tooldispatch/toolkit/internal/hostform"
)

// MaxOrigins is the most origins one secret may be bound to.
const MaxOrigins = 20

// ErrOrigin: a secret is referenced in a request to an origin it is not
// bound to (or it is bound to none).
var ErrOrigin = errors.New("secrets: origin not allowed")

// ErrInvalidOrigin: an origin is not of the form scheme://host[:port].
var ErrInvalidOrigin = errors.New("secrets: invalid origin")

// ParseOrigin normalises an origin written as scheme://host[:port] (a
// trailing "/" is accepted): the scheme is http or https, the host is in
// the one form the network tools dial (IDNA Lookup, lower case, no trailing
// dot, canonical IP addresses; see OriginOf), and the port is always
// explicit (https://API.example.com gives https://api.example.com:443). A
// path, query, fragment or user information is refused: an origin names
// where a secret may go, nothing more.
func ParseOrigin(s string) (string, error) {
	raw := strings.TrimSpace(s)
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return "", fmt.Errorf("%w: %q is not scheme://host[:port]", ErrInvalidOrigin, s)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", fmt.Errorf("%w: %q has more than scheme://host[:port] (no user, path, query or fragment)", ErrInvalidOrigin, s)
	}
	return OriginOf(u)
}

// OriginOf returns the normalised origin of an http(s) URL (see
// ParseOrigin); its path, query and user information are ignored. The host
// is the one the HTTP client dials for u (hostform.Host): a look-alike name
// such as apİ.example.com (dialled as xn--api-bec.example.com) never gives
// the origin of api.example.com, and a host that does not survive IDNA
// Lookup gives an error.
func OriginOf(u *url.URL) (string, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("%w: %q is not an http or https URL", ErrInvalidOrigin, u.Redacted())
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("%w: %q has no host", ErrInvalidOrigin, u.Redacted())
	}
	n, err := hostform.URL(u)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrInvalidOrigin, u.Redacted(), err)
	}
	port := n.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(n.Hostname(), port), nil
}

// renormalise brings origins stored by an earlier version (whose hosts were
// only lower-cased) to the form OriginOf gives now; an origin that no
// longer parses is dropped, so its secret is not sent there.
func renormalise(origins []string) []string {
	if len(origins) == 0 {
		return origins
	}
	out := make([]string, 0, len(origins))
	for _, o := range origins {
		if n, err := ParseOrigin(o); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ParseOrigins normalises a list of origins, sorted and without
// duplicates; an empty list gives nil.
func ParseOrigins(list []string) ([]string, error) {
	if len(list) > MaxOrigins {
		return nil, fmt.Errorf("%w: %d origins, more than the %d allowed", ErrInvalidOrigin, len(list), MaxOrigins)
	}
	var out []string
	for _, s := range list {
		o, err := ParseOrigin(s)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// bindHint says how a secret gets origins.
func bindHint(name string) string {
	return fmt.Sprintf("the operator binds it in the configuration ([[secrets.bind]] name = %q, origins = [\"https://host\"], "+
		"or the API's base_url on [[web.apis]]), or the user stores it again with store_secret and confirms the origins it may be sent to", name)
}

// originError is the refusal of a secret for an origin. It names the
// secret and the origins, never the value.
func originError(name, target string, allowed []string) error {
	if len(allowed) == 0 {
		return fmt.Errorf("%w: secret %q is bound to no origin, so it is sent nowhere (it was refused for %s); %s",
			ErrOrigin, name, target, bindHint(name))
	}
	return fmt.Errorf("%w: secret %q may only be sent to %s, not to %s; send the request to one of those origins, "+
		"or %s", ErrOrigin, name, strings.Join(allowed, ", "), target, bindHint(name))
}
