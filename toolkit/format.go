package toolkit

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// FormatPolicy is how argument schemas treat the `format` keyword. The same
// policy holds for every draft (draft-07, 2019-09, 2020-12 and schemas
// without `$schema`): which draft a schema declares never decides whether
// `"format": "email"` is checked.
type FormatPolicy string

const (
	// FormatAssert checks the formats listed in AssertedFormats and treats
	// every other format as an annotation. The default.
	FormatAssert FormatPolicy = "assert"
	// FormatAnnotate treats every format as an annotation.
	FormatAnnotate FormatPolicy = "annotate"
)

// AssertedFormats lists the formats FormatAssert checks: those whose checker
// follows its RFC (date-time, date, time and duration per RFC 3339; email
// per RFC 5321; hostname per RFC 1123; ipv4 and ipv6; uuid per RFC 4122; uri,
// uri-reference, iri and iri-reference per RFC 3986/3987; json-pointer and
// relative-json-pointer per RFC 6901; uri-template per RFC 6570; regex per
// ECMA-262). Formats not listed (idn-email, idn-hostname, and the library's
// non-standard period and semver) are annotations.
var AssertedFormats = []string{
	"date", "date-time", "duration", "email", "hostname", "ipv4", "ipv6",
	"iri", "iri-reference", "json-pointer", "regex", "relative-json-pointer",
	"time", "uri", "uri-reference", "uri-template", "uuid",
}

// annotatedKnownFormats are the formats the validator library would check on
// its own but FormatAssert leaves as annotations.
var annotatedKnownFormats = []string{"period", "semver"}

// Validate names a bad policy.
func (p FormatPolicy) Validate() error {
	switch p {
	case FormatAssert, FormatAnnotate:
		return nil
	}
	return fmt.Errorf("format policy %q: want %q or %q", string(p), FormatAssert, FormatAnnotate)
}

// annotates tells whether the policy leaves format name unchecked.
func (p FormatPolicy) annotates(name string) bool {
	return p == FormatAnnotate || !slices.Contains(AssertedFormats, name)
}

// apply sets the policy on a compiler: formats are asserted in every draft,
// and each format the policy annotates gets a checker that accepts anything.
func (p FormatPolicy) apply(c *jsonschema.Compiler) {
	c.AssertFormat()
	c.RegisterFormat(&jsonschema.Format{Name: "uri-template", Validate: validateURITemplate})
	for _, name := range append(slices.Clone(AssertedFormats), annotatedKnownFormats...) {
		if p.annotates(name) {
			c.RegisterFormat(&jsonschema.Format{Name: name, Validate: func(any) error { return nil }})
		}
	}
}

// validateURITemplate checks a string against the RFC 6570 grammar (levels
// 1 to 4).
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
			if c <= 0x20 || c == 0x7f || strings.IndexByte("\"'<>\\^`|}", c) >= 0 {
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
