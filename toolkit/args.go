package toolkit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits bounds what ParseArgs and ArgsFromValue accept. A zero (or
// negative) field means the matching DefaultLimits field.
type Limits struct {
	// MaxBytes is the longest arguments text accepted: the raw JSON for
	// ParseArgs, the canonical form for ArgsFromValue.
	MaxBytes int
	// MaxDepth is the deepest nesting of objects and arrays; the arguments
	// object itself is level 1.
	MaxDepth int
	// MaxKeys is the most object keys in the whole document, every nested
	// object counted.
	MaxKeys int
}

// DefaultLimits are the limits used for every zero field of a Limits.
var DefaultLimits = Limits{MaxBytes: 1 << 20, MaxDepth: 64, MaxKeys: 100000}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultLimits.MaxDepth
	}
	if l.MaxKeys <= 0 {
		l.MaxKeys = DefaultLimits.MaxKeys
	}
	return l
}

// ArgsError is why arguments were refused. Msg is the whole message, written
// for the model that produced the arguments (for example
// `arguments: duplicate key "path" at byte 31`); Offset is the byte offset in
// the raw text the problem was found at, or -1 when it has no single place.
type ArgsError struct {
	Msg    string
	Offset int
}

// Error returns Msg.
func (e *ArgsError) Error() string { return e.Msg }

// emptyCanonical is the canonical form of the empty arguments object.
const emptyCanonical = "{}"

// ParseArgs parses the arguments text of a tool call strictly and returns its
// canonical form (RFC 8785 style: keys sorted by UTF-16 code units, no
// whitespace, minimal string escapes, normalised numbers) together with the
// value decoded from it, in one pass over raw.
//
// An empty or all-whitespace raw means {}. Anything else must be exactly one
// JSON object, optionally surrounded by whitespace. Refused, as *ArgsError:
// invalid JSON, a top level that is not an object, duplicate keys or keys
// that differ only by case (simple Unicode case folding) within one object,
// nesting deeper than lim.MaxDepth, more than lim.MaxKeys keys, raw longer
// than lim.MaxBytes, invalid UTF-8, unpaired surrogate escapes and numbers
// beyond the float64 range.
//
// Value holds map[string]any, []any, string, bool, nil and json.Number (the
// canonical number text); it is exactly what decoding Canonical gives.
// Strings in Value may share memory with raw.
func ParseArgs(raw string, lim Limits) (Args, error) {
	lim = lim.withDefaults()
	if len(raw) > lim.MaxBytes {
		return Args{}, &ArgsError{
			Msg:    fmt.Sprintf("arguments: %d bytes, limit %d", len(raw), lim.MaxBytes),
			Offset: -1,
		}
	}
	p := newParser(raw, lim)
	defer p.release()
	p.skipWS()
	if p.i == len(raw) {
		return Args{Canonical: []byte(emptyCanonical), Value: map[string]any{}}, nil
	}
	if raw[p.i] != '{' {
		return Args{}, p.notObject()
	}
	p.out = make([]byte, 0, len(raw))
	v, err := p.object()
	if err != nil {
		return Args{}, err
	}
	p.skipWS()
	if p.i < len(raw) {
		return Args{}, &ArgsError{
			Msg:    fmt.Sprintf("arguments: invalid JSON at byte %d: unexpected %s after the arguments object; send exactly one object", p.i, describeAt(raw, p.i)),
			Offset: p.i,
		}
	}
	return Args{Canonical: p.out, Value: v}, nil
}

// notObject explains a top-level value that is not an object.
func (p *parser) notObject() *ArgsError {
	start := p.i
	c := p.s[start]
	var got string
	switch {
	case c == '[':
		got = "array"
	case c == '"':
		got = "string"
		if s, _, err := p.str(); err == nil {
			if t := strings.TrimSpace(s); strings.HasPrefix(t, "{") {
				return &ArgsError{
					Msg:    "arguments must be a JSON object, got string (a JSON-encoded object): send the object itself, not a string holding it",
					Offset: start,
				}
			}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		got = "number"
	case strings.HasPrefix(p.s[start:], "true"), strings.HasPrefix(p.s[start:], "false"):
		got = "boolean"
	case strings.HasPrefix(p.s[start:], "null"):
		got = "null"
	default:
		return p.syntax(start, "a JSON object starting with '{'")
	}
	return &ArgsError{Msg: "arguments must be a JSON object, got " + got, Offset: start}
}

// member is one parsed key/value pair of the object being parsed.
type member struct {
	key   string
	val   any
	hash  uint64 // foldHash(key)
	off   int    // byte offset of the key in the raw text
	start int    // span of `"key":value` in parser.out
	end   int
	next  int32 // previous member of the same object with the same hash, or -1
}

// parser is the single-pass strict JSON scanner behind ParseArgs: it decodes
// and writes the canonical form at the same time.
type parser struct {
	s       string
	i       int
	out     []byte
	mem     []member // members of the objects being parsed, innermost last
	vals    []any    // elements of the arrays being parsed, innermost last
	tmp     []byte   // scratch for reordering members
	scratch []byte   // scratch for unescaping strings
	depth   int
	keys    int
	lim     Limits
}

// parserPool keeps parsers' scratch stacks between calls.
var parserPool = sync.Pool{New: func() any { return new(parser) }}

// maxPooledScratch is the largest scratch capacity a parser keeps when it
// goes back to the pool.
const maxPooledScratch = 1024

func newParser(raw string, lim Limits) *parser {
	p := parserPool.Get().(*parser)
	*p = parser{s: raw, lim: lim, mem: p.mem[:0], vals: p.vals[:0], tmp: p.tmp[:0], scratch: p.scratch[:0]}
	return p
}

// release drops every reference to the parsed text and values and returns
// the parser to the pool.
func (p *parser) release() {
	p.s, p.out = "", nil
	if cap(p.mem) > maxPooledScratch {
		p.mem = nil
	} else {
		clear(p.mem[:cap(p.mem)])
	}
	if cap(p.vals) > maxPooledScratch {
		p.vals = nil
	} else {
		clear(p.vals[:cap(p.vals)])
	}
	if cap(p.tmp) > 64*maxPooledScratch {
		p.tmp = nil
	}
	if cap(p.scratch) > 64*maxPooledScratch {
		p.scratch = nil
	}
	parserPool.Put(p)
}

// smallObject is the member count up to which duplicate and case checks scan
// the object's members instead of indexing them.
const smallObject = 32

func (p *parser) skipWS() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value() (any, error) {
	if p.i >= len(p.s) {
		return nil, p.syntax(p.i, "a value")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		m, err := p.object()
		if err != nil {
			return nil, err
		}
		return m, nil
	case c == '[':
		return p.array()
	case c == '"':
		s, esc, err := p.str()
		if err != nil {
			return nil, err
		}
		p.appendStr(s, esc)
		return s, nil
	case c == 't':
		return p.literal("true", true)
	case c == 'f':
		return p.literal("false", false)
	case c == 'n':
		return p.literal("null", nil)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return nil, p.syntax(p.i, "a value")
}

func (p *parser) literal(lit string, v any) (any, error) {
	if !strings.HasPrefix(p.s[p.i:], lit) {
		return nil, p.syntax(p.i, "a value (true, false, null, a number, a string, an object or an array)")
	}
	p.i += len(lit)
	p.out = append(p.out, lit...)
	return v, nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > p.lim.MaxDepth {
		return &ArgsError{
			Msg:    fmt.Sprintf("arguments: nested deeper than %d levels", p.lim.MaxDepth),
			Offset: p.i,
		}
	}
	return nil
}

func (p *parser) object() (map[string]any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.i++ // '{'
	p.out = append(p.out, '{')
	objStart := len(p.out)
	base := len(p.mem)
	p.skipWS()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		p.out = append(p.out, '}')
		p.depth--
		return map[string]any{}, nil
	}
	sorted := true
	var index map[uint64]int32
	for {
		p.skipWS()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			if p.i < len(p.s) && p.s[p.i] == '}' && len(p.mem) > base {
				return nil, p.syntaxMsg(p.i, "trailing comma before '}'")
			}
			return nil, p.syntax(p.i, "a double-quoted key")
		}
		keyOff := p.i
		key, esc, err := p.str()
		if err != nil {
			return nil, err
		}
		p.keys++
		if p.keys > p.lim.MaxKeys {
			return nil, &ArgsError{
				Msg:    fmt.Sprintf("arguments: more than %d keys", p.lim.MaxKeys),
				Offset: keyOff,
			}
		}
		h := foldHash(key)
		next, err := p.checkKey(base, &index, key, h, keyOff)
		if err != nil {
			return nil, err
		}
		p.skipWS()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, p.syntax(p.i, "':' after the key")
		}
		p.i++
		p.skipWS()
		start := len(p.out)
		p.appendStr(key, esc)
		p.out = append(p.out, ':')
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		if sorted && len(p.mem) > base && compareUTF16(p.mem[len(p.mem)-1].key, key) > 0 {
			sorted = false
		}
		if index != nil {
			index[h] = int32(len(p.mem))
		}
		p.mem = append(p.mem, member{key: key, val: v, hash: h, off: keyOff, start: start, end: len(p.out), next: next})
		p.skipWS()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			p.out = append(p.out, ',')
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			break
		}
		return nil, p.syntax(p.i, "',' or '}' after the value")
	}
	ms := p.mem[base:]
	if !sorted {
		p.reorder(objStart, ms)
	}
	m := make(map[string]any, len(ms))
	for k := range ms {
		m[ms[k].key] = ms[k].val
		ms[k].val = nil
	}
	p.mem = p.mem[:base]
	p.out = append(p.out, '}')
	p.depth--
	return m, nil
}

// checkKey refuses key when a member of the object being parsed (from
// base) has the same key or one that folds to it (keyClash): a linear scan
// for a small object, past smallObject members an index by folded hash
// built once (*index) and chained through member.next. It returns the
// chain's head for key's hash, for the new member's next.
func (p *parser) checkKey(base int, index *map[uint64]int32, key string, h uint64, keyOff int) (int32, error) {
	if *index == nil && len(p.mem)-base < smallObject {
		for j := base; j < len(p.mem); j++ {
			if p.mem[j].hash == h {
				if err := keyClash(p.mem[j].key, key, keyOff); err != nil {
					return -1, err
				}
			}
		}
		return -1, nil
	}
	if *index == nil {
		*index = make(map[uint64]int32, 2*smallObject)
		for j := base; j < len(p.mem); j++ {
			if prev, ok := (*index)[p.mem[j].hash]; ok {
				p.mem[j].next = prev
			} else {
				p.mem[j].next = -1
			}
			(*index)[p.mem[j].hash] = int32(j)
		}
	}
	j, ok := (*index)[h]
	if !ok {
		return -1, nil
	}
	next := j
	for ; j >= 0; j = p.mem[j].next {
		if err := keyClash(p.mem[j].key, key, keyOff); err != nil {
			return -1, err
		}
	}
	return next, nil
}

// reorder rewrites the members of the object whose text starts at objStart
// in key order.
func (p *parser) reorder(objStart int, ms []member) {
	p.tmp = append(p.tmp[:0], p.out[objStart:]...)
	slices.SortFunc(ms, func(a, b member) int { return compareUTF16(a.key, b.key) })
	p.out = p.out[:objStart]
	for k := range ms {
		if k > 0 {
			p.out = append(p.out, ',')
		}
		p.out = append(p.out, p.tmp[ms[k].start-objStart:ms[k].end-objStart]...)
	}
}

func (p *parser) array() ([]any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.i++ // '['
	p.out = append(p.out, '[')
	base := len(p.vals)
	p.skipWS()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		p.out = append(p.out, ']')
		p.depth--
		return []any{}, nil
	}
	for {
		p.skipWS()
		if p.i < len(p.s) && p.s[p.i] == ']' && len(p.vals) > base {
			return nil, p.syntaxMsg(p.i, "trailing comma before ']'")
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		p.vals = append(p.vals, v)
		p.skipWS()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			p.out = append(p.out, ',')
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			break
		}
		return nil, p.syntax(p.i, "',' or ']' after the element")
	}
	arr := make([]any, len(p.vals)-base)
	copy(arr, p.vals[base:])
	clear(p.vals[base:])
	p.vals = p.vals[:base]
	p.out = append(p.out, ']')
	p.depth--
	return arr, nil
}

// str scans the string starting at p.i (a '"') and returns its decoded text
// and whether it held escapes. Without escapes the text is a substring of
// the input and is already in canonical form.
func (p *parser) str() (string, bool, error) {
	s := p.s
	start := p.i + 1
	for i := start; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				p.i = i + 1
				return s[start:i], false, nil
			case c == '\\':
				return p.strEscaped(start, i)
			case c < 0x20:
				return "", false, p.controlChar(i, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return "", false, p.badUTF8(i)
		}
		i += size
	}
	return "", false, p.syntaxMsg(len(s), fmt.Sprintf("unterminated string starting at byte %d", p.i))
}

// strEscaped finishes a string holding escapes; i is the first backslash.
func (p *parser) strEscaped(start, i int) (string, bool, error) {
	s := p.s
	buf := append(p.scratch[:0], s[start:i]...)
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				p.i = i + 1
				p.scratch = buf[:0]
				return string(buf), true, nil
			case c == '\\':
				if i+1 >= len(s) {
					return "", false, p.syntaxMsg(len(s), fmt.Sprintf("unterminated string starting at byte %d", start-1))
				}
				switch e := s[i+1]; e {
				case '"', '\\', '/':
					buf = append(buf, e)
				case 'b':
					buf = append(buf, '\b')
				case 'f':
					buf = append(buf, '\f')
				case 'n':
					buf = append(buf, '\n')
				case 'r':
					buf = append(buf, '\r')
				case 't':
					buf = append(buf, '\t')
				case 'u':
					r, ok := hex4(s, i+2)
					if !ok {
						return "", false, p.syntaxMsg(i, `invalid \u escape: want four hex digits`)
					}
					switch {
					case utf16.IsSurrogate(r) && r < 0xdc00:
						r2, ok := rune(0), false
						if i+7 < len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
							r2, ok = hex4(s, i+8)
						}
						if !ok || r2 < 0xdc00 || r2 > 0xdfff {
							return "", false, p.loneSurrogate(i, r)
						}
						r = utf16.DecodeRune(r, r2)
						i += 6
					case utf16.IsSurrogate(r):
						return "", false, p.loneSurrogate(i, r)
					}
					buf = utf8.AppendRune(buf, r)
					i += 4
				default:
					if e > ' ' && e < utf8.RuneSelf {
						return "", false, p.syntaxMsg(i, fmt.Sprintf("invalid escape '\\%c' in string", e))
					}
					return "", false, p.syntaxMsg(i, fmt.Sprintf("invalid escape: backslash followed by %s", printable(s, i+1)))
				}
				i += 2
				continue
			case c < 0x20:
				return "", false, p.controlChar(i, c)
			}
			buf = append(buf, c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return "", false, p.badUTF8(i)
		}
		buf = append(buf, s[i:i+size]...)
		i += size
	}
	return "", false, p.syntaxMsg(len(s), fmt.Sprintf("unterminated string starting at byte %d", start-1))
}

func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// appendStr writes a string in canonical form; s came from str, so without
// escapes its raw text is already canonical.
func (p *parser) appendStr(s string, escaped bool) {
	if !escaped {
		p.out = append(p.out, '"')
		p.out = append(p.out, s...)
		p.out = append(p.out, '"')
		return
	}
	p.out = appendJSONString(p.out, s)
}

func (p *parser) number() (any, error) {
	start := p.i
	end, isInt, bad := scanNumber(p.s, start)
	if bad >= 0 {
		return nil, p.syntax(bad, "a digit")
	}
	p.i = end
	text := p.s[start:end]
	mark := len(p.out)
	out, plain, err := appendNumber(p.out, text, isInt)
	if err != nil {
		return nil, &ArgsError{
			Msg:    fmt.Sprintf("arguments: number %s at byte %d is out of range", text, start),
			Offset: start,
		}
	}
	p.out = out
	if plain {
		return json.Number(text), nil
	}
	return json.Number(p.out[mark:]), nil
}

// scanNumber scans a JSON number starting at s[i]. It returns the end of the
// number, whether it is an integer literal (no fraction, no exponent), and
// the offset of the first bad byte or -1.
func scanNumber(s string, i int) (end int, isInt bool, bad int) {
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return i, false, i
	}
	isInt = true
	if i < len(s) && s[i] == '.' {
		i++
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return i, false, i
		}
		isInt = false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return i, false, i
		}
		isInt = false
	}
	return i, isInt, -1
}

// appendNumber appends the canonical form of the valid JSON number text:
// integers that fit int64 as they are (they have no leading zeros), -0 as 0,
// anything else as the ES6 form of the nearest float64. plain reports that
// the text was appended unchanged.
func appendNumber(b []byte, text string, isInt bool) (out []byte, plain bool, err error) {
	if isInt {
		if text == "-0" {
			return append(b, '0'), false, nil
		}
		digits := len(text)
		if text[0] == '-' {
			digits--
		}
		if digits < 19 {
			return append(b, text...), true, nil
		}
		if digits == 19 {
			if _, err := strconv.ParseInt(text, 10, 64); err == nil {
				return append(b, text...), true, nil
			}
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && (math.IsInf(f, 0) || math.IsNaN(f)) {
		return b, false, err
	}
	return appendES6(b, f), false, nil
}

// appendES6 appends f as ECMAScript's Number.prototype.toString would (the
// RFC 8785 number form): shortest round-trip digits, exponent form below
// 1e-6 and from 1e21 on, -0 as 0.
func appendES6(b []byte, f float64) []byte {
	if f == 0 {
		return append(b, '0')
	}
	format := byte('f')
	if abs := math.Abs(f); abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// strconv writes e-07; ES6 writes e-7.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONString appends s as an RFC 8785 string: only '"', '\\' and
// control characters are escaped, with the short forms where JSON has them.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// compareUTF16 orders valid UTF-8 strings by their UTF-16 code units, as
// RFC 8785 sorts keys. Byte order is code point order, which differs from
// UTF-16 order only between U+E000..U+FFFF and supplementary characters
// (encoded as surrogates D800..DFFF in UTF-16).
func compareUTF16(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		// Lead bytes 0xEE/0xEF start U+E000..U+FFFF, 0xF0..0xF4 start
		// supplementary characters; the common prefix puts both at a rune
		// boundary.
		if x >= 0xee && y >= 0xee {
			if xs, ys := x >= 0xf0, y >= 0xf0; xs != ys {
				if xs {
					return -1
				}
				return 1
			}
		}
		if x < y {
			return -1
		}
		return 1
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

// foldHash hashes s under simple Unicode case folding: strings.EqualFold
// strings hash the same. Each rune is replaced by the smallest rune of its
// case-folding orbit.
func foldHash(s string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(s); {
		c := s[i]
		var r rune
		if c < utf8.RuneSelf {
			if c >= 'a' && c <= 'z' {
				c -= 'a' - 'A'
			}
			r = rune(c)
			i++
		} else {
			var size int
			r, size = utf8.DecodeRuneInString(s[i:])
			i += size
			r = foldMin(r)
		}
		h ^= uint64(r)
		h *= prime
	}
	return h
}

// foldMin returns the smallest rune that simple case folding equates with r.
func foldMin(r rune) rune {
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	return m
}

// keyClash reports key as a duplicate of prev or as differing from it only
// by case.
func keyClash(prev, key string, off int) *ArgsError {
	if prev == key {
		return &ArgsError{
			Msg:    fmt.Sprintf("arguments: duplicate key %s at byte %d", strconv.Quote(key), off),
			Offset: off,
		}
	}
	if strings.EqualFold(prev, key) {
		return &ArgsError{
			Msg:    fmt.Sprintf("arguments: keys %s and %s differ only by case at byte %d", strconv.Quote(prev), strconv.Quote(key), off),
			Offset: off,
		}
	}
	return nil
}

func (p *parser) syntax(i int, want string) *ArgsError {
	if i >= len(p.s) {
		return p.syntaxMsg(i, "the text ends early, want "+want)
	}
	return p.syntaxMsg(i, fmt.Sprintf("want %s, got %s", want, describeAt(p.s, i)))
}

func (p *parser) syntaxMsg(i int, msg string) *ArgsError {
	return &ArgsError{Msg: fmt.Sprintf("arguments: invalid JSON at byte %d: %s", i, msg), Offset: i}
}

func (p *parser) controlChar(i int, c byte) *ArgsError {
	return p.syntaxMsg(i, fmt.Sprintf("control character 0x%02x in string; escape it (\\n, \\t, \\u00XX)", c))
}

func (p *parser) badUTF8(i int) *ArgsError {
	return &ArgsError{Msg: fmt.Sprintf("arguments: invalid UTF-8 at byte %d", i), Offset: i}
}

func (p *parser) loneSurrogate(i int, r rune) *ArgsError {
	return &ArgsError{
		Msg:    fmt.Sprintf("arguments: unpaired surrogate escape \\u%04x at byte %d; a surrogate must be paired (\\ud83d\\ude00) or the character written as UTF-8", r, i),
		Offset: i,
	}
}

// describeAt names the character at s[i] for an error message.
func describeAt(s string, i int) string {
	if i >= len(s) {
		return "end of text"
	}
	return printable(s, i)
}

func printable(s string, i int) string {
	if i >= len(s) {
		return "end of text"
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	if (r == utf8.RuneError && size == 1) || !unicode.IsPrint(r) {
		return fmt.Sprintf("byte 0x%02x", s[i])
	}
	return "'" + string(r) + "'"
}

// maxCanonicalDepth bounds the nesting Canonicalize follows, so a value that
// contains itself fails instead of exhausting the stack.
const maxCanonicalDepth = 10000

// Canonicalize returns the canonical form ParseArgs would give for a value
// already decoded: map[string]any (a nil map is {}), []any (a nil slice is
// []), string, bool, nil, json.Number, float64 and the Go integer types.
// Invalid UTF-8, non-finite floats, malformed json.Number text and other
// types are refused with *ArgsError. It checks no limits and no key case
// clashes; ArgsFromValue does.
func Canonicalize(v any) ([]byte, error) {
	e := encoder{maxDepth: maxCanonicalDepth, maxBytes: math.MaxInt}
	if err := e.value(v, 0); err != nil {
		return nil, err
	}
	return e.out, nil
}

// ArgsFromValue turns an already decoded arguments object (run_tool given
// its inner arguments as an object) into Args: the canonical form, and a
// Value decoded afresh from it, so numbers are canonical json.Number. Every
// ParseArgs rule applies; lim.MaxBytes bounds the canonical form. A nil map
// is {}.
func ArgsFromValue(v map[string]any, lim Limits) (Args, error) {
	lim = lim.withDefaults()
	e := encoder{maxDepth: lim.MaxDepth, maxBytes: lim.MaxBytes}
	if err := e.value(v, 0); err != nil {
		return Args{}, err
	}
	return ParseArgs(string(e.out), lim)
}

// encoder writes the canonical form of decoded values.
type encoder struct {
	out      []byte
	maxDepth int
	maxBytes int
}

func canonError(format string, a ...any) *ArgsError {
	return &ArgsError{Msg: "arguments: " + fmt.Sprintf(format, a...), Offset: -1}
}

func (e *encoder) value(v any, depth int) error {
	if len(e.out) > e.maxBytes {
		return canonError("canonical form longer than %d bytes", e.maxBytes)
	}
	switch v := v.(type) {
	case nil:
		e.out = append(e.out, "null"...)
	case bool:
		e.out = strconv.AppendBool(e.out, v)
	case string:
		if !utf8.ValidString(v) {
			return canonError("invalid UTF-8 in string %q", v)
		}
		e.out = appendJSONString(e.out, v)
	case json.Number:
		s := string(v)
		end, isInt, bad := scanNumber(s, 0)
		if bad >= 0 || end != len(s) {
			return canonError("invalid number %q", s)
		}
		out, _, err := appendNumber(e.out, s, isInt)
		if err != nil {
			return canonError("number %s is out of range", s)
		}
		e.out = out
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return canonError("number %v is not valid JSON", v)
		}
		e.out = appendES6(e.out, v)
	case int:
		e.out = strconv.AppendInt(e.out, int64(v), 10)
	case int8:
		e.out = strconv.AppendInt(e.out, int64(v), 10)
	case int16:
		e.out = strconv.AppendInt(e.out, int64(v), 10)
	case int32:
		e.out = strconv.AppendInt(e.out, int64(v), 10)
	case int64:
		e.out = strconv.AppendInt(e.out, v, 10)
	case uint:
		e.uint(uint64(v))
	case uint8:
		e.uint(uint64(v))
	case uint16:
		e.uint(uint64(v))
	case uint32:
		e.uint(uint64(v))
	case uint64:
		e.uint(v)
	case map[string]any:
		if depth++; depth > e.maxDepth {
			return canonError("nested deeper than %d levels", e.maxDepth)
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			if !utf8.ValidString(k) {
				return canonError("invalid UTF-8 in key %q", k)
			}
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareUTF16)
		e.out = append(e.out, '{')
		for i, k := range keys {
			if i > 0 {
				e.out = append(e.out, ',')
			}
			e.out = appendJSONString(e.out, k)
			e.out = append(e.out, ':')
			if err := e.value(v[k], depth); err != nil {
				return err
			}
		}
		e.out = append(e.out, '}')
	case []any:
		if depth++; depth > e.maxDepth {
			return canonError("nested deeper than %d levels", e.maxDepth)
		}
		e.out = append(e.out, '[')
		for i, x := range v {
			if i > 0 {
				e.out = append(e.out, ',')
			}
			if err := e.value(x, depth); err != nil {
				return err
			}
		}
		e.out = append(e.out, ']')
	default:
		return canonError("unsupported value of type %T", v)
	}
	if len(e.out) > e.maxBytes {
		return canonError("canonical form longer than %d bytes", e.maxBytes)
	}
	return nil
}

// uint writes an unsigned integer; beyond int64 it takes the float64 form,
// as ParseArgs gives for such a literal.
func (e *encoder) uint(u uint64) {
	if u <= math.MaxInt64 {
		e.out = strconv.AppendUint(e.out, u, 10)
		return
	}
	e.out = appendES6(e.out, float64(u))
}

// canonicalOrEmpty is a's canonical form, {} for the zero Args.
func (a Args) canonicalOrEmpty() []byte {
	if len(a.Canonical) == 0 {
		return []byte(emptyCanonical)
	}
	return a.Canonical
}

// Hash returns the lowercase hex SHA-256 of the canonical arguments (of {}
// for the zero Args): the argument hash of intent records and confirmations.
func (a Args) Hash() string {
	sum := sha256.Sum256(a.canonicalOrEmpty())
	return hex.EncodeToString(sum[:])
}

// DedupKey returns the de-duplication key of a call: the lowercase hex
// SHA-256 of tool + "|" + canonical arguments.
func DedupKey(tool string, a Args) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{'|'})
	h.Write(a.canonicalOrEmpty())
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}
