package secrets

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
)

// minShiftedCore is the shortest run of base64 characters that is redacted
// when a value sits inside a longer base64 text (as in a Basic
// Authorization header): shorter runs would match unrelated text.
const minShiftedCore = 6

// Redactor replaces every known secret value in a text with [secret:NAME],
// along with the value's URL-encoded (query and path), JSON-escaped and
// base64 forms (standard and URL alphabets, padded or not, and the part of
// them that stays the same when the value is encoded inside a longer text).
//
// The zero value and a nil *Redactor redact nothing. Redact is safe for
// concurrent use and does not block while the set of secrets changes.
type Redactor struct {
	rep atomic.Pointer[strings.Replacer]
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
	rep := r.rep.Load()
	if rep == nil {
		return s
	}
	return rep.Replace(s)
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
		r.rep.Store(nil)
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
			ph := "[secret:" + nv.name + "]"
			args = append(args, ph, ph)
		}
	}
	for _, p := range pats {
		args = append(args, p.find, "[secret:"+p.name+"]")
	}
	r.rep.Store(strings.NewReplacer(args...))
}

// forms returns the value and the encoded forms in which it may show up.
func forms(v string) []string {
	if v == "" {
		return nil
	}
	out := []string{v, url.QueryEscape(v), url.PathEscape(v)}
	// JSON-escaped, as Go writes it (with HTML escapes) and as most other
	// encoders do (without).
	if b, err := json.Marshal(v); err == nil {
		out = append(out, string(b[1:len(b)-1]))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err == nil {
		b := bytes.TrimSpace(buf.Bytes())
		out = append(out, string(b[1:len(b)-1]))
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		padded := enc.EncodeToString([]byte(v))
		out = append(out, padded, strings.TrimRight(padded, "="))
		out = append(out, shiftedBase64(enc.WithPadding(base64.NoPadding), v)...)
	}
	return out
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
