package toolkit

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"
)

// URIs and IRIs (RFC 3986, RFC 3987) and URI templates (RFC 6570), as
// JSON Schema's formats define them: each checked against its grammar, not
// against what a URL parser would accept (net/url takes spaces, quotes and
// brackets in paths).

// validateURI checks the "uri" format: an absolute URI (with a scheme).
func validateURI(v any) error { return uriFormat(v, false, false) }

// validateURIReference checks the "uri-reference" format: a URI or a
// relative reference.
func validateURIReference(v any) error { return uriFormat(v, false, true) }

// validateIRI checks the "iri" format: an absolute IRI.
func validateIRI(v any) error { return uriFormat(v, true, false) }

// validateIRIReference checks the "iri-reference" format: an IRI or a
// relative IRI reference.
func validateIRIReference(v any) error { return uriFormat(v, true, true) }

func uriFormat(v any, iri, relative bool) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	u := uriChecker{iri: iri}
	rest, frag, hasFrag := strings.Cut(s, "#")
	if hasFrag {
		if err := u.chars(frag, "fragment", "/?:@", false); err != nil {
			return err
		}
	}
	rest, query, hasQuery := strings.Cut(rest, "?")
	if hasQuery {
		if err := u.chars(query, "query", "/?:@", true); err != nil {
			return err
		}
	}
	scheme, hier, hasScheme := strings.Cut(rest, ":")
	if !hasScheme || strings.ContainsRune(scheme, '/') || !validScheme(scheme) {
		if !relative {
			return errors.New("no scheme: not an absolute URI")
		}
		return u.relativePart(rest)
	}
	return u.hierPart(hier)
}

// validScheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
func validScheme(s string) bool {
	if s == "" || !isAlpha(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlpha(c) && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// uriChecker checks the parts of a URI or, when iri, of an IRI.
type uriChecker struct{ iri bool }

// hierPart: "//" authority path-abempty / path-absolute / path-rootless /
// path-empty.
func (u uriChecker) hierPart(s string) error {
	if rest, ok := strings.CutPrefix(s, "//"); ok {
		auth, path, _ := strings.Cut(rest, "/")
		if err := u.authority(auth); err != nil {
			return err
		}
		return u.chars(path, "path", "/:@", false)
	}
	return u.chars(s, "path", "/:@", false)
}

// relativePart: "//" authority path-abempty / path-absolute /
// path-noscheme / path-empty.
func (u uriChecker) relativePart(s string) error {
	if strings.HasPrefix(s, "//") {
		return u.hierPart(s)
	}
	first, _, _ := strings.Cut(s, "/")
	if strings.ContainsRune(first, ':') {
		return errors.New("a colon in the first segment of a relative reference (write ./ before it)")
	}
	return u.chars(s, "path", "/:@", false)
}

// authority: [ userinfo "@" ] host [ ":" port ].
func (u uriChecker) authority(a string) error {
	if at := strings.LastIndexByte(a, '@'); at >= 0 {
		if err := u.chars(a[:at], "user information", ":", false); err != nil {
			return err
		}
		a = a[at+1:]
	}
	host, port := a, ""
	if strings.HasPrefix(a, "[") {
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return errors.New("an unclosed [ in the host")
		}
		if err := ipLiteral(a[1:end]); err != nil {
			return err
		}
		host, port = "", a[end+1:]
		if port != "" {
			p, ok := strings.CutPrefix(port, ":")
			if !ok {
				return errors.New("characters after the ] of the host")
			}
			port = ":" + p
		}
	} else if i := strings.IndexByte(a, ':'); i >= 0 {
		host, port = a[:i], a[i:]
	}
	if err := u.chars(host, "host", "", false); err != nil {
		return err
	}
	if p, ok := strings.CutPrefix(port, ":"); ok {
		for i := 0; i < len(p); i++ {
			if p[i] < '0' || p[i] > '9' {
				return fmt.Errorf("port %q is not a number", p)
			}
		}
	}
	return nil
}

// ipLiteral: IPv6address / IPvFuture ("v" 1*HEXDIG "." 1*( unreserved /
// sub-delims / ":" )).
func ipLiteral(s string) error {
	if len(s) > 0 && (s[0] == 'v' || s[0] == 'V') {
		ver, rest, ok := strings.Cut(s[1:], ".")
		if !ok || ver == "" || rest == "" || strings.TrimFunc(ver, func(r rune) bool { return r < utf8.RuneSelf && isHex(byte(r)) }) != "" {
			return fmt.Errorf("%q is not an IPvFuture literal", s)
		}
		for i := 0; i < len(rest); i++ {
			if c := rest[i]; !isUnreserved(c) && !isSubDelim(c) && c != ':' {
				return fmt.Errorf("%q is not an IPvFuture literal", s)
			}
		}
		return nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Zone() != "" {
		return fmt.Errorf("%q is not an IPv6 address", s)
	}
	return nil
}

func isUnreserved(c byte) bool {
	return isAlpha(c) || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func isSubDelim(c byte) bool { return strings.IndexByte("!$&'()*+,;=", c) >= 0 }

// chars checks that s holds only unreserved characters, sub-delims,
// percent-encodings and the extra ASCII characters; in an IRI also
// ucschar, and iprivate where private is set (the query).
func (u uriChecker) chars(s, part, extra string, private bool) error {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return fmt.Errorf("a bad percent-encoding in the %s", part)
			}
			i += 3
			continue
		case c < utf8.RuneSelf:
			if !isUnreserved(c) && !isSubDelim(c) && strings.IndexByte(extra, c) < 0 {
				return fmt.Errorf("character %q not allowed in the %s", c, part)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if !u.iri || !(isUCSChar(r) || private && isIPrivate(r)) {
			return fmt.Errorf("character %q not allowed in the %s", r, part)
		}
		i += n
	}
	return nil
}

// isUCSChar: the ucschar ranges of RFC 3987 §2.2.
func isUCSChar(r rune) bool {
	switch {
	case r >= 0xa0 && r <= 0xd7ff, r >= 0xf900 && r <= 0xfdcf, r >= 0xfdf0 && r <= 0xffef:
		return true
	case r >= 0x10000 && r <= 0xefffd:
		return r&0xffff <= 0xfffd && !(r >= 0xe0000 && r < 0xe1000)
	}
	return false
}

// isIPrivate: the iprivate ranges of RFC 3987 §2.2.
func isIPrivate(r rune) bool {
	return r >= 0xe000 && r <= 0xf8ff || r >= 0xf0000 && r <= 0xffffd || r >= 0x100000 && r <= 0x10fffd
}

// validateURITemplate checks a string against the RFC 6570 grammar (levels
// 1 to 4). An apostrophe is taken in literals, as the JSON-Schema-Test-Suite
// expects (it is a sub-delim in URIs).
func validateURITemplate(v any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return fmt.Errorf("unclosed expression at %d", i)
			}
			if err := uriTemplateExpression(s[i+1 : i+end]); err != nil {
				return err
			}
			i += end + 1
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return fmt.Errorf("bad percent-encoding at %d", i)
			}
			i += 3
		case c < 0x80:
			if c <= 0x20 || c == 0x7f || strings.IndexByte("\"<>\\^`|}", c) >= 0 {
				return fmt.Errorf("character %q not allowed at %d", c, i)
			}
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError {
				return fmt.Errorf("bad UTF-8 at %d", i)
			}
			i += n
		}
	}
	return nil
}

func uriTemplateExpression(e string) error {
	if e != "" && strings.IndexByte("+#./;?&=,!@|", e[0]) >= 0 {
		e = e[1:]
	}
	if e == "" {
		return fmt.Errorf("empty expression")
	}
	for _, spec := range strings.Split(e, ",") {
		name := spec
		if cut, ok := strings.CutSuffix(spec, "*"); ok {
			name = cut
		} else if at := strings.IndexByte(spec, ':'); at >= 0 {
			name = spec[:at]
			n := spec[at+1:]
			if n == "" || len(n) > 4 || n[0] == '0' || strings.Trim(n, "0123456789") != "" {
				return fmt.Errorf("bad prefix length in %q", spec)
			}
		}
		if !uriTemplateVarname(name) {
			return fmt.Errorf("bad variable name %q", name)
		}
	}
	return nil
}

// uriTemplateVarname: varchar *( ["."] varchar ), varchar = ALPHA / DIGIT /
// "_" / pct-encoded.
func uriTemplateVarname(n string) bool {
	if n == "" || n[0] == '.' || n[len(n)-1] == '.' {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		case c == '.':
			if n[i-1] == '.' {
				return false
			}
		case c == '%':
			if i+2 >= len(n) || !isHex(n[i+1]) || !isHex(n[i+2]) {
				return false
			}
			i += 2
		default:
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
