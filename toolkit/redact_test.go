package toolkit

import (
	"strings"
	"testing"
)

func TestSafeCut(t *testing.T) {
	const s = "ab[secret:API_KEY]cdé[x] [secret:]"
	tests := []struct {
		n, cut, start int
	}{
		{0, 0, 0},
		{2, 2, 2},
		{3, 2, 18},   // inside the marker: before it, after it
		{17, 2, 18},  // on its last byte
		{18, 18, 18}, // just after it
		{21, 20, 22}, // inside é
		{24, 24, 24}, // "[x]" is no marker
		{30, 30, 30}, // "[secret:]" names nothing: no marker
		{99, len(s), len(s)},
		{-1, 0, 0},
	}
	for _, tt := range tests {
		if got := SafeCut(s, tt.n); got != tt.cut {
			t.Errorf("SafeCut(%d) = %d, want %d", tt.n, got, tt.cut)
		}
		if got := SafeStart(s, tt.n); got != tt.start {
			t.Errorf("SafeStart(%d) = %d, want %d", tt.n, got, tt.start)
		}
	}
	if got := ClipRedacted(s, 10, "…"); got != "ab…" {
		t.Errorf("ClipRedacted = %q", got)
	}
	if got := ClipRedacted("short", 10, "…"); got != "short" {
		t.Errorf("ClipRedacted of a short text = %q", got)
	}
	long := Marker(strings.Repeat("N", 64))
	if len(long) != MaxMarkerLen || MarkerLen(long+"x") != MaxMarkerLen || MarkerLen(Marker(strings.Repeat("N", 65))) != 0 {
		t.Errorf("the longest marker: %d bytes, MaxMarkerLen %d", len(long), MaxMarkerLen)
	}
	if got := SafeCut("x"+long+"y", 40); got != 1 {
		t.Errorf("SafeCut inside the longest marker = %d, want 1", got)
	}
}

func TestCallWithoutRedactor(t *testing.T) {
	var c *Call
	if c.Redact("v") != "v" || (&Call{}).Redact("v") != "v" {
		t.Error("a call without a redactor changed the text")
	}
	st := (&Call{}).RedactStream()
	if st.Write("a") != "a" || st.Flush() != "" {
		t.Error("a call without a redactor held text back")
	}
	if RedactHead(nil, "abc") != "abc" {
		t.Error("RedactHead without a redactor changed the text")
	}
}
