package hostform

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Limits of a DNS name (RFC 1035), in bytes of its ASCII form.
const (
	maxNameLen  = 253
	maxLabelLen = 63
)

// ErrInvalid: a host is not a valid host name or address. Every *Error
// matches it.
var ErrInvalid = errors.New("hostform: not a valid host name")

// Error says which host was refused and why.
type Error struct {
	Host   string // as written
	Reason string
}

// Error names the host and the reason.
func (e *Error) Error() string {
	return fmt.Sprintf("host %q is not a valid host name: %s", e.Host, e.Reason)
}

// Is makes an *Error match ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Host returns the one form of host, a URL's host without port or
// brackets: a lower-case ASCII DNS name without a trailing dot, a dotted
// decimal IPv4 address, or a canonical IPv6 address (without brackets).
// Host of its own result returns it unchanged.
func Host(host string) (string, error) {
	bad := func(reason string) (string, error) { return "", &Error{Host: host, Reason: reason} }
	if host == "" {
		return bad("it is empty")
	}
	if strings.Contains(host, ":") {
		ip, err := netip.ParseAddr(host)
		switch {
		case err != nil || !ip.Is6():
			return bad("it is not an IPv6 address")
		case ip.Zone() != "":
			return bad("an IPv6 zone names an interface of this machine")
		}
		return ip.String(), nil
	}
	ascii, err := idna.Lookup.ToASCII(host)
	if err != nil {
		return bad("IDNA " + strings.TrimPrefix(err.Error(), "idna: "))
	}
	ascii = strings.TrimSuffix(ascii, ".")
	if ascii == "" {
		return bad("it has no name")
	}
	labels := strings.Split(ascii, ".")
	if endsInNumber(labels) {
		ip, ok := parseIPv4(labels)
		if !ok {
			return bad("it ends in a number but is not an IPv4 address")
		}
		return ip.String(), nil
	}
	if len(ascii) > maxNameLen {
		return bad(fmt.Sprintf("it is longer than %d characters", maxNameLen))
	}
	for _, l := range labels {
		switch {
		case l == "":
			return bad("it has an empty label")
		case len(l) > maxLabelLen:
			return bad(fmt.Sprintf("a label is longer than %d characters", maxLabelLen))
		}
	}
	return ascii, nil
}

// URL returns a copy of u whose host is in its one form and whose port, if
// any, is written in decimal without leading zeros. The scheme and the rest
// are left as they are.
func URL(u *url.URL) (*url.URL, error) {
	h, err := Host(u.Hostname())
	if err != nil {
		return nil, err
	}
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, &Error{Host: u.Host, Reason: fmt.Sprintf("port %q is not a port number (1-65535)", p)}
		}
		h += ":" + strconv.Itoa(n)
	}
	c := *u
	if u.User != nil {
		user := *u.User
		c.User = &user
	}
	c.Host = h
	return &c, nil
}

// IsForm reports whether host (without port or brackets) is already in its
// one form.
func IsForm(host string) bool {
	h, err := Host(host)
	return err == nil && h == host
}

// endsInNumber reports whether the last label is a number as the URL
// standard reads IPv4 parts: decimal digits, or 0x and hexadecimal digits.
func endsInNumber(labels []string) bool {
	last := labels[len(labels)-1]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") || strings.HasPrefix(last, "0X") {
		return strings.Trim(last[2:], "0123456789abcdefABCDEF") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

// parseIPv4 reads an IPv4 address of one to four parts, each decimal, octal
// (leading 0) or hexadecimal (0x), the last part filling the bytes the
// others leave (the URL standard's IPv4 parser, as browsers and inet_aton
// read it).
func parseIPv4(labels []string) (netip.Addr, bool) {
	if len(labels) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(labels))
	for i, l := range labels {
		n, ok := parseIPv4Number(l)
		if !ok {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseIPv4Number reads one part of an IPv4 address.
func parseIPv4Number(s string) (uint64, bool) {
	base := 10
	switch {
	case s == "":
		return 0, false
	case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
		s, base = s[2:], 16
	case len(s) >= 2 && s[0] == '0':
		s, base = s[1:], 8
	}
	if s == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(s, base, 32)
	return n, err == nil
}
