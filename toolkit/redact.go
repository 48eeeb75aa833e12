package toolkit

import (
	"strings"
	"unicode/utf8"
)

// MarkerPrefix starts every redaction marker: a secret value in a text is
// replaced by "[secret:NAME]".
const MarkerPrefix = "[secret:"

// maxMarkerName is the longest secret name (see secrets.ValidName).
const maxMarkerName = 64

// MaxMarkerLen is the length of the longest redaction marker: a buffer
// that keeps this much beyond where it will be cut can always cut outside
// a marker.
const MaxMarkerLen = len(MarkerPrefix) + maxMarkerName + 1

// Marker returns the redaction marker of the secret name.
func Marker(name string) string { return MarkerPrefix + name + "]" }

// Redactor takes secret values out of text that leaves a tool. The
// dispatcher hands one to every call (Call.Redactor) and applies it to every
// tool message and event; secrets.Redactor is one. A tool that cuts its
// output redacts it first (redact, then cut) and cuts outside markers
// (SafeCut, SafeStart), so that no cut leaves the start or the end of a
// secret behind.
type Redactor interface {
	// Redact returns s with every secret value, in every form the
	// redactor knows, replaced by its marker.
	Redact(s string) string
	// NewStream returns a redactor of one text that arrives in pieces.
	NewStream() RedactStream
}

// RedactStream redacts one text that arrives in pieces (streamed output, a
// body read in chunks): a secret split across pieces is redacted whole.
// It is not safe for concurrent use.
type RedactStream interface {
	// Write takes the next piece and returns the redacted text that is
	// now settled. It holds back the end of the text that may still
	// become a secret (at most the length of the longest form of one).
	Write(piece string) string
	// Flush returns what Write held back, redacted: the text has ended.
	Flush() string
}

// RedactHead returns head, the start of a longer text whose rest was never
// read, redacted, without its end that may be the start of a secret cut by
// the read. A nil r returns head.
func RedactHead(r Redactor, head string) string {
	if r == nil {
		return head
	}
	return r.NewStream().Write(head)
}

// SafeCut returns the largest n' ≤ n at which s may be cut so that s[:n']
// ends on a character boundary and outside every redaction marker.
func SafeCut(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	if n <= 0 {
		return 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	if i, end := markerAround(s, n); end > n {
		return i
	}
	return n
}

// SafeStart returns the smallest n' ≥ n at which s may be cut so that
// s[n':] starts on a character boundary and outside every redaction
// marker.
func SafeStart(s string, n int) int {
	if n <= 0 {
		return 0
	}
	if n >= len(s) {
		return len(s)
	}
	for n < len(s) && !utf8.RuneStart(s[n]) {
		n++
	}
	if _, end := markerAround(s, n); end > n {
		return end
	}
	return n
}

// ClipRedacted returns s cut to at most n bytes outside every marker, with
// suffix added when it was cut.
func ClipRedacted(s string, n int, suffix string) string {
	if len(s) <= n {
		return s
	}
	return s[:SafeCut(s, n)] + suffix
}

// markerAround returns the start and end of the marker of s that starts
// before n, the nearest one, or (-1, -1).
func markerAround(s string, n int) (int, int) {
	lo := max(0, n-len(MarkerPrefix)-maxMarkerName)
	i := strings.LastIndexByte(s[lo:n], '[')
	if i < 0 {
		return -1, -1
	}
	i += lo
	if l := MarkerLen(s[i:]); l > 0 {
		return i, i + l
	}
	return -1, -1
}

// MarkerLen returns the length of the redaction marker s starts with, or 0.
func MarkerLen(s string) int {
	if !strings.HasPrefix(s, MarkerPrefix) {
		return 0
	}
	for j := len(MarkerPrefix); j < len(s) && j <= len(MarkerPrefix)+maxMarkerName; j++ {
		switch c := s[j]; {
		case c == ']':
			if j == len(MarkerPrefix) {
				return 0
			}
			return j + 1
		case c == '_' || c == '.' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		default:
			return 0
		}
	}
	return 0
}

// Redact returns s with the call's redactor applied (s itself without
// one).
func (c *Call) Redact(s string) string {
	if c == nil || c.Redactor == nil {
		return s
	}
	return c.Redactor.Redact(s)
}

// RedactStream returns a stream redactor of the call's redactor; without
// one, a stream that passes every piece through.
func (c *Call) RedactStream() RedactStream {
	if c == nil || c.Redactor == nil {
		return passThrough{}
	}
	return c.Redactor.NewStream()
}

// passThrough is the RedactStream of a call without a redactor.
type passThrough struct{}

func (passThrough) Write(piece string) string { return piece }
func (passThrough) Flush() string             { return "" }
