package badger

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// TestKeyLayout: the session and run keys keep their layout (stored data
// is read by it) and each is built in one allocation, with no spare
// capacity.
func TestKeyLayout(t *testing.T) {
	h := func(s string) string { return hex.EncodeToString([]byte(s)) }
	for _, tt := range []struct {
		name string
		key  func() []byte
		want string
	}{
		{"sessionPrefix", func() []byte { return sessionPrefix("sé/1") }, "v1/s/" + h("sé/1") + "/"},
		{"metaKey", func() []byte { return metaKey("s1") }, "v1/s/" + h("s1") + "/meta"},
		{"turnPrefix", func() []byte { return turnPrefix("s1") }, "v1/s/" + h("s1") + "/t/"},
		{"turnKey", func() []byte { return turnKey("s1", 42) }, "v1/s/" + h("s1") + "/t/0000000000000042"},
		{"turnIDKey", func() []byte { return turnIDKey("s1", "t/9") }, "v1/s/" + h("s1") + "/id/" + h("t/9")},
		{"runPrefix", func() []byte { return runPrefix("s1", "r/1") }, "v1/r/" + h("s1") + "/" + h("r/1") + "/"},
		{"dedupKey", func() []byte { return dedupKey("s1", "r1", "k") }, "v1/r/" + h("s1") + "/" + h("r1") + "/d/" + h("k")},
		{"fetchedKey", func() []byte { return fetchedKey("s1", "r1", "echo") }, "v1/r/" + h("s1") + "/" + h("r1") + "/f/" + h("echo")},
		{"intentPrefix", func() []byte { return intentPrefix("s1") }, "v1/i/" + h("s1") + "/"},
		{"intentKey", func() []byte { return intentKey("s1", 7) }, "v1/i/" + h("s1") + "/0000000000000007"},
		{"esc", func() []byte { return esc("\x00\xffAz") }, "00ff417a"},
		{"empty ids", func() []byte { return dedupKey("", "", "") }, "v1/r///d/"},
	} {
		if got := tt.key(); !bytes.Equal(got, []byte(tt.want)) {
			t.Errorf("%s = %q, want %q", tt.name, got, tt.want)
		} else if cap(got) != len(got) {
			// An append to a shared prefix must not write into another key.
			t.Errorf("%s: capacity %d, length %d", tt.name, cap(got), len(got))
		}
		if n := testing.AllocsPerRun(20, func() { _ = tt.key() }); n != 1 {
			t.Errorf("%s: %v allocations, want 1", tt.name, n)
		}
	}
}
