package secrets

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// minShiftedCore is the shortest run of base64 characters that is redacted
// when a value sits inside a longer base64 text (as in a Basic
// Authorization header): shorter runs would match unrelated text.
const minShiftedCore = 6

// Redactor replaces every known secret value in a text with [secret:NAME]
// (toolkit.Marker), along with the value's URL-encoded (query and path,
// hex digits in either case), JSON-escaped (as Go, PHP, Python, Java write
// it: "/" escaped or not, non-ASCII as \uXXXX or not, hex digits in either
// case) and base64 forms (standard and URL alphabets, padded or not, and
// the part of them that stays the same when the value is encoded inside a
// longer text).
//
// It is a toolkit.Redactor: NewStream redacts a text that arrives in
// pieces, a secret split across pieces included.
//
// The zero value and a nil *Redactor redact nothing. Redact and NewStream
// are safe for concurrent use and do not block while the set of secrets
// changes.
type Redactor struct {
	current atomic.Pointer[redactSet]
}

// setVersions numbers the sets of secrets of every Redactor of the
// process, so that no two sets share a version.
var setVersions atomic.Uint64

// redactSet is one set of secrets, ready to redact.
type redactSet struct {
	version uint64
	rep     *strings.Replacer
	// pats are the texts rep replaces, in its order of preference (a
	// placeholder first, then the longest), and first indexes them by
	// their first byte, in the same order.
	pats  []string
	first [256][]int32
}

// namedValue is one secret for the redactor.
type namedValue struct{ name, value string }

// NewRedactor returns a redactor of a fixed set of secrets, by name.
func NewRedactor(values map[string]string) *Redactor {
	named := make([]namedValue, 0, len(values))
	for n, v := range values {
		named = append(named, namedValue{name: n, value: v})
	}
	r := &Redactor{}
	r.set(named)
	return r
}

// Redact returns s with every known secret value, in any of its encoded
// forms, replaced by [secret:NAME].
func (r *Redactor) Redact(s string) string {
	if r == nil || s == "" {
		return s
	}
	set := r.current.Load()
	if set == nil {
		return s
	}
	return set.rep.Replace(s)
}

// set replaces the redactor's secrets.
func (r *Redactor) set(named []namedValue) {
	type pattern struct{ find, name string }
	var pats []pattern
	seen := map[string]bool{}
	// Sorted by name so that a value shared by two secrets always gets the
	// same name.
	slices.SortFunc(named, func(a, b namedValue) int {
		return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.value, b.value))
	})
	for _, nv := range named {
		for _, f := range forms(nv.value) {
			if f != "" && !seen[f] {
				seen[f] = true
				pats = append(pats, pattern{find: f, name: nv.name})
			}
		}
	}
	if len(pats) == 0 {
		r.current.Store(nil)
		return
	}
	// strings.Replacer tries patterns in argument order at each position:
	// longer first, so a value that contains another is replaced whole.
	slices.SortStableFunc(pats, func(a, b pattern) int { return cmp.Compare(len(b.find), len(a.find)) })
	// Placeholders come first and map to themselves, so that redacting a
	// text twice changes nothing even when a value occurs in a placeholder.
	args := make([]string, 0, 2*len(pats)+2*len(named))
	for i, nv := range named {
		if i == 0 || named[i-1].name != nv.name {
			ph := toolkit.Marker(nv.name)
			args = append(args, ph, ph)
		}
	}
	for _, p := range pats {
		args = append(args, p.find, toolkit.Marker(p.name))
	}
	set := &redactSet{version: setVersions.Add(1), rep: strings.NewReplacer(args...)}
	for i := 0; i < len(args); i += 2 {
		set.first[args[i][0]] = append(set.first[args[i][0]], int32(len(set.pats)))
		set.pats = append(set.pats, args[i])
	}
	r.current.Store(set)
}

// Version tells the redactor's sets of secrets apart: it changes whenever
// the set does (0: no secrets), and no two sets of the process share one,
// so a text redacted under one version needs no redacting again under the
// same version.
func (r *Redactor) Version() uint64 {
	if r == nil {
		return 0
	}
	if set := r.current.Load(); set != nil {
		return set.version
	}
	return 0
}

var _ toolkit.Redactor = (*Redactor)(nil)

// NewStream returns a redactor of one text that arrives in pieces
// (toolkit.RedactStream): the concatenation of what Write and Flush return
// is Redact of the whole text, whichever way it was split.
func (r *Redactor) NewStream() toolkit.RedactStream { return &stream{r: r} }

// stream is a RedactStream of a Redactor.
type stream struct {
	r       *Redactor
	pending string // the held-back end of the text
}

// Write implements toolkit.RedactStream.
func (st *stream) Write(piece string) string {
	text := st.pending + piece
	var set *redactSet
	if st.r != nil {
		set = st.r.current.Load()
	}
	if set == nil {
		st.pending = ""
		return text
	}
	cut := set.settled(text)
	st.pending = strings.Clone(text[cut:])
	return set.rep.Replace(text[:cut])
}

// Flush implements toolkit.RedactStream.
func (st *stream) Flush() string {
	text := st.pending
	st.pending = ""
	return st.r.Redact(text)
}

// settled returns how much of text redacts the same whatever follows it:
// it walks text as the replacer does (at each position the first pattern
// in the replacer's order that matches wins, and the walk goes on after
// it) and stops at the first position where a pattern the replacer prefers
// could still match once more text arrives.
func (set *redactSet) settled(text string) int {
	i := 0
	for i < len(text) {
		matched := 0
		for _, p := range set.first[text[i]] {
			pat, rest := set.pats[p], text[i:]
			if len(rest) < len(pat) {
				if strings.HasPrefix(pat, rest) {
					return i
				}
				continue
			}
			if rest[:len(pat)] == pat {
				matched = len(pat)
				break
			}
		}
		i += max(matched, 1)
	}
	return i
}

// forms returns the value and the encoded forms in which it may show up.
func forms(v string) []string {
	if v == "" {
		return nil
	}
	out := []string{v}
	for _, esc := range []string{url.QueryEscape(v), url.PathEscape(v)} {
		out = append(out, esc, lowerPercentHex(esc))
	}
	out = append(out, jsonForms(v)...)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		padded := enc.EncodeToString([]byte(v))
		out = append(out, padded, strings.TrimRight(padded, "="))
		out = append(out, shiftedBase64(enc.WithPadding(base64.NoPadding), v)...)
	}
	return out
}

// jsonForms returns v as JSON encoders write it inside a string: Go's,
// with HTML escapes and without (as most other encoders); each also with
// "/" escaped as "\/" (PHP's json_encode), with every non-ASCII character
// as \uXXXX (Python's json.dumps, PHP's), and with upper-case hex digits
// (Java's and .NET's encoders). A server echoing a request writes the
// value in its encoder's form, not in Go's.
func jsonForms(v string) []string {
	var bases []string
	if b, err := json.Marshal(v); err == nil {
		bases = append(bases, string(b[1:len(b)-1]))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err == nil {
		b := bytes.TrimSpace(buf.Bytes())
		bases = append(bases, string(b[1:len(b)-1]))
	}
	var out []string
	for _, base := range bases {
		for _, f := range []string{base, asciiEscaped(base)} {
			for _, g := range []string{f, strings.ReplaceAll(f, "/", `\/`)} {
				out = append(out, g, upperUnicodeHex(g))
			}
		}
	}
	return out
}

// asciiEscaped writes every non-ASCII character of a JSON string's content
// as \uXXXX, beyond the Basic Multilingual Plane as a surrogate pair.
func asciiEscaped(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xFFFF:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, hi, lo)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// upperUnicodeHex writes the hex digits of a JSON string's \uXXXX escapes
// in upper case.
func upperUnicodeHex(s string) string {
	b := []byte(s)
	for i := 0; i+6 <= len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] == 'u' {
			copy(b[i+2:i+6], bytes.ToUpper(b[i+2:i+6]))
		}
		i++ // an escaped character, whatever it is, is not the start of an escape
	}
	return string(b)
}

// lowerPercentHex writes the hex digits of a percent-encoded text's escapes
// in lower case, as many servers write them.
func lowerPercentHex(s string) string {
	b := []byte(s)
	for i := 0; i+3 <= len(b); i++ {
		if b[i] == '%' {
			copy(b[i+1:i+3], bytes.ToLower(b[i+1:i+3]))
			i += 2
		}
	}
	return string(b)
}

// shiftedBase64 returns, for each of the three byte offsets modulo 3 at
// which v can start inside a longer encoded text, the base64 characters that
// depend on v's bytes alone. They are substrings of any base64 encoding of a
// text that contains v (e.g. "user:" + v in a Basic Authorization header).
func shiftedBase64(enc *base64.Encoding, v string) []string {
	var out []string
	for k := range 3 {
		buf := make([]byte, k+len(v))
		copy(buf[k:], v)
		s := enc.EncodeToString(buf)
		// Characters of the last, incomplete group depend on what follows.
		n := len(buf)
		full := n / 3 * 4
		switch n % 3 {
		case 1:
			full++
		case 2:
			full += 2
		}
		s = s[:min(full, len(s))]
		// The first characters depend on the k bytes before v: a group of
		// 3 bytes is 4 characters of 6 bits; with 1 byte before v the first
		// 2 characters hold its bits, with 2 bytes the first 3.
		drop := [3]int{0, 2, 3}[k]
		if len(s) <= drop {
			continue
		}
		core := s[drop:]
		if len(core) >= minShiftedCore {
			out = append(out, core)
		}
	}
	return out
}
