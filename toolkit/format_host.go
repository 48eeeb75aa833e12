package toolkit

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/text/unicode/norm"
)

// Host names, e-mail addresses and IPv4 addresses, as JSON Schema's
// formats define them. IDNA2008 (RFC 5890–5893) comes from
// golang.org/x/net/idna in its registration profile; what that package
// leaves out, the code points RFC 5892 lists as exceptions and its
// CONTEXTO rules, is checked here.

// idnaRegistration validates labels as a registry would (no mapping):
// IDNA2008 code points, hyphen rules, joiners (CONTEXTJ), the Bidi rule and
// DNS lengths.
var idnaRegistration = idna.New(
	idna.ValidateForRegistration(),
	idna.CheckHyphens(true),
	idna.CheckJoiners(true),
	idna.BidiRule(),
	idna.VerifyDNSLength(true),
	idna.StrictDomainName(true),
)

// maxDomainLength is the longest domain name in octets of its ASCII form,
// without a root dot (RFC 1034 §3.1, 255 octets on the wire).
const maxDomainLength = 253

// validateHostname checks the "hostname" format: an RFC 1123 host name (labels of ASCII
// letters, digits and hyphens, 1 to 63 octets, not starting or ending with
// a hyphen, 253 octets in all, no trailing dot), where a label starting
// "xn--" must be a valid A-label (RFC 5891 §4.4: it decodes to a valid
// U-label and encodes back to itself).
func validateHostname(v any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	if s == "" || len(s) > maxDomainLength {
		return fmt.Errorf("a host name has 1 to %d characters", maxDomainLength)
	}
	for _, label := range strings.Split(s, ".") {
		if err := ldhLabel(label); err != nil {
			return err
		}
		if isALabel(label) {
			if err := checkALabel(label); err != nil {
				return err
			}
		}
	}
	return nil
}

// ldhLabel checks an ASCII label: letters, digits and hyphens, 1 to 63
// octets, no hyphen at either end.
func ldhLabel(label string) error {
	if label == "" || len(label) > 63 {
		return errors.New("each label has 1 to 63 characters")
	}
	if label[0] == '-' || label[len(label)-1] == '-' {
		return fmt.Errorf("label %q starts or ends with a hyphen", label)
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("label %q holds a character other than letters, digits and hyphens", label)
		}
	}
	return nil
}

// isALabel reports whether an ASCII label has the ACE prefix "xn--" (in
// any case).
func isALabel(label string) bool {
	return len(label) >= 4 && strings.EqualFold(label[:4], "xn--")
}

// checkALabel checks that an A-label decodes to a valid U-label that
// encodes back to the same A-label.
func checkALabel(label string) error {
	lower := strings.ToLower(label)
	u, err := idnaRegistration.ToUnicode(lower)
	if err != nil {
		return fmt.Errorf("label %q is not a valid A-label: %w", label, err)
	}
	if err := checkULabel(u); err != nil {
		return fmt.Errorf("label %q is not a valid A-label: %w", label, err)
	}
	if a, err := idnaRegistration.ToASCII(u); err != nil || a != lower {
		return fmt.Errorf("label %q is not the canonical A-label of what it decodes to", label)
	}
	return nil
}

// idnSeparators are the label separators of internationalised host names
// (RFC 3490 §3.1): full stop, ideographic full stop, fullwidth full stop,
// halfwidth ideographic full stop.
var idnSeparators = strings.NewReplacer("\u3002", ".", "\uff0e", ".", "\uff61", ".")

// validateIDNHostname checks the "idn-hostname" format: labels separated by any of the four IDNA
// full stops, each an LDH label, a valid A-label or a valid U-label
// (IDNA2008), the name in its ASCII form no longer than 253 octets, no
// empty label (so no leading or trailing dot), and the Bidi rule over the
// whole name.
func validateIDNHostname(v any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	if s == "" {
		return errors.New("an empty host name")
	}
	name := idnSeparators.Replace(s)
	for _, label := range strings.Split(name, ".") {
		if label == "" {
			return errors.New("an empty label (a leading, trailing or doubled dot)")
		}
		switch {
		case !isASCIIString(label):
			if err := checkULabel(label); err != nil {
				return fmt.Errorf("label %q: %w", label, err)
			}
		case isALabel(label):
			if err := checkALabel(label); err != nil {
				return err
			}
		default:
			if err := ldhLabel(label); err != nil {
				return err
			}
		}
	}
	a, err := idnaRegistration.ToASCII(strings.ToLower(name))
	if err != nil {
		return fmt.Errorf("not a valid internationalised host name: %w", err)
	}
	if len(a) > maxDomainLength {
		return fmt.Errorf("longer than %d octets in its ASCII form", maxDomainLength)
	}
	return nil
}

func isASCIIString(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// checkULabel checks a U-label: valid for registration (no code point
// UTS 46 maps or disallows, NFC, hyphens, joiners, Bidi), and what
// golang.org/x/net/idna leaves to the caller: every code point PVALID,
// CONTEXTJ or CONTEXTO by RFC 5892's derived property (letters, marks and
// digits, LDH, the exceptions of §2.6; not the symbols and punctuation UTS
// 46 also takes, nor old Hangul jamo), and each CONTEXTO code point in a
// context its rule allows (RFC 5892 Appendix A.3–A.9).
func checkULabel(label string) error {
	if _, err := idnaRegistration.ToASCII(label); err != nil {
		return err
	}
	for _, r := range label {
		if !idnaCodePoint(r) {
			return fmt.Errorf("U+%04X is not allowed in IDNA2008 labels", r)
		}
	}
	runes := []rune(label)
	arabicIndic, extendedArabicIndic := false, false
	for _, r := range runes {
		switch {
		case r >= 0x0660 && r <= 0x0669:
			arabicIndic = true
		case r >= 0x06f0 && r <= 0x06f9:
			extendedArabicIndic = true
		}
	}
	for i, r := range runes {
		prev, next := rune(-1), rune(-1)
		if i > 0 {
			prev = runes[i-1]
		}
		if i+1 < len(runes) {
			next = runes[i+1]
		}
		switch {
		case r == 0x00b7: // MIDDLE DOT: between two l
			if prev != 'l' || next != 'l' {
				return errors.New("a middle dot (U+00B7) must stand between two l")
			}
		case r == 0x0375: // GREEK LOWER NUMERAL SIGN: before a Greek letter
			if next < 0 || !unicode.Is(unicode.Greek, next) {
				return errors.New("a Greek keraia (U+0375) must be followed by a Greek character")
			}
		case r == 0x05f3 || r == 0x05f4: // HEBREW GERESH, GERSHAYIM: after a Hebrew letter
			if prev < 0 || !unicode.Is(unicode.Hebrew, prev) {
				return fmt.Errorf("U+%04X must follow a Hebrew character", r)
			}
		case r == 0x30fb: // KATAKANA MIDDLE DOT: in a label with Hiragana, Katakana or Han
			if !strings.ContainsFunc(label, func(c rune) bool {
				return c != 0x30fb && (unicode.Is(unicode.Hiragana, c) || unicode.Is(unicode.Katakana, c) || unicode.Is(unicode.Han, c))
			}) {
				return errors.New("a katakana middle dot (U+30FB) needs Hiragana, Katakana or Han in its label")
			}
		case r >= 0x0660 && r <= 0x0669 && extendedArabicIndic, r >= 0x06f0 && r <= 0x06f9 && arabicIndic:
			return errors.New("Arabic-Indic and Extended Arabic-Indic digits are mixed")
		}
	}
	return nil
}

// idnaLetterDigits are the general categories RFC 5892 §2.1 makes PVALID.
var idnaLetterDigits = []*unicode.RangeTable{unicode.Ll, unicode.Lu, unicode.Lo, unicode.Lm, unicode.Mn, unicode.Mc, unicode.Nd}

// idnaCodePoint reports whether r may stand in a U-label at all (its
// context checked apart): lower-case LDH, LetterDigits but old Hangul jamo
// (§2.9), or an exception that is not DISALLOWED (§2.6), or a joiner
// (CONTEXTJ).
func idnaCodePoint(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
		return true
	case r >= 0x1100 && r <= 0x11ff, r >= 0xa960 && r <= 0xa97f, r >= 0xd7b0 && r <= 0xd7ff:
		return false
	}
	switch r {
	case 0x00df, 0x03c2, 0x06fd, 0x06fe, 0x0f0b, 0x3007, // PVALID exceptions
		0x00b7, 0x0375, 0x05f3, 0x05f4, 0x30fb, // CONTEXTO
		0x200c, 0x200d: // CONTEXTJ
		return true
	case 0x0640, 0x07fa, 0x302e, 0x302f, 0x3031, 0x3032, 0x3033, 0x3034, 0x3035, 0x303b: // DISALLOWED exceptions
		return false
	}
	return unicode.In(r, idnaLetterDigits...)
}

// validateEmail checks the "email" format: an RFC 5321 Mailbox — a dot-string or
// quoted-string local part of at most 64 octets, "@", and a domain that is
// a host name or an address literal ([IPv4] or [IPv6:…]).
func validateEmail(v any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	return mailbox(s, false)
}

// validateIDNEmail checks the "idn-email" format: an RFC 6531 Mailbox — as email, but the
// local part may hold any non-ASCII character and the domain is an
// internationalised host name.
func validateIDNEmail(v any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	return mailbox(s, true)
}

func mailbox(s string, intl bool) error {
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return errors.New("no @")
	}
	local, domain := s[:at], s[at+1:]
	if local == "" || len(local) > 64 {
		return errors.New("the local part has 1 to 64 octets")
	}
	if err := localPart(local, intl); err != nil {
		return err
	}
	if strings.HasPrefix(domain, "[") && strings.HasSuffix(domain, "]") {
		return addressLiteral(domain[1 : len(domain)-1])
	}
	if intl {
		// A domain is compared in NFC (RFC 6531 §3.2 via RFC 5890's
		// U-labels, which are NFC).
		return validateIDNHostname(norm.NFC.String(domain))
	}
	return validateHostname(domain)
}

// localPart checks a Dot-string (atoms of atext joined by single dots) or
// a Quoted-string (printable characters, with backslash escapes).
func localPart(local string, intl bool) error {
	if local[0] == '"' {
		if len(local) < 2 || local[len(local)-1] != '"' {
			return errors.New("an unclosed quoted local part")
		}
		q := local[1 : len(local)-1]
		for i := 0; i < len(q); i++ {
			c := q[i]
			switch {
			case c == '\\':
				if i+1 == len(q) || q[i+1] < 0x20 || q[i+1] > 0x7e {
					return errors.New("a bad escape in the quoted local part")
				}
				i++
			case c == '"':
				return errors.New("an unescaped quote in the quoted local part")
			case c >= 0x20 && c <= 0x7e:
			case c >= utf8.RuneSelf && intl:
			default:
				return fmt.Errorf("character 0x%02x in the quoted local part", c)
			}
		}
		return nil
	}
	for _, atom := range strings.Split(local, ".") {
		if atom == "" {
			return errors.New("the local part starts or ends with a dot, or has two in a row")
		}
		for _, r := range atom {
			switch {
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			case strings.ContainsRune("!#$%&'*+-/=?^_`{|}~", r):
			case r >= utf8.RuneSelf && intl && r != utf8.RuneError:
			default:
				return fmt.Errorf("character %q in the local part (quote the local part to use it)", r)
			}
		}
	}
	return nil
}

// addressLiteral checks the inside of an RFC 5321 address literal.
func addressLiteral(lit string) error {
	if rest, ok := strings.CutPrefix(lit, "IPv6:"); ok {
		return validateIPv6(rest)
	}
	return validateIPv4(lit)
}

// validateIPv4 checks the "ipv4" format: a dotted-quad (RFC 2673 §3.2): four decimal
// octets without leading zeros, nothing else.
func validateIPv4(v any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	// netip takes exactly four decimal octets and refuses leading zeros.
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return errors.New("not a dotted-quad IPv4 address")
	}
	return nil
}

// validateIPv6 checks the "ipv6" format: an RFC 4291 text address, without a zone.
func validateIPv6(v any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Zone() != "" {
		return errors.New("not an IPv6 address")
	}
	return nil
}
