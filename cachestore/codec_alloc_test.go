package cachestore

import (
	"strings"
	"testing"
)

// TestEncodeDedupAllocatesOnce: a de-dup record (one per successful call
// of a turn) is encoded into one buffer of its final size, not grown field
// by field.
func TestEncodeDedupAllocatesOnce(t *testing.T) {
	e := &DedupEntry{Key: strings.Repeat("ab", 32), Tool: "read_file", Content: strings.Repeat("a line of the file\n", 40),
		Paths: []string{"src/main.go", "src/util.go"}, StaleOnMutation: true, Stamp: "src/main.go 1204 1733100000 9f86d081"}
	var raw []byte
	if n := testing.AllocsPerRun(100, func() { raw = EncodeDedup(e) }); n != 1 {
		t.Errorf("EncodeDedup made %v allocations, want 1", n)
	}
	got, err := DecodeDedup(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got.Key != e.Key || got.Tool != e.Tool || got.Content != e.Content || strings.Join(got.Paths, ",") != strings.Join(e.Paths, ",") ||
		got.StaleOnMutation != e.StaleOnMutation || got.Stamp != e.Stamp {
		t.Errorf("round trip: got %+v, want %+v", got, e)
	}
}
