package actors

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAutoLoadedSchemaCountsForTheRestOfTheTurn: with AutoLoadSchemas, the
// first call of a tool whose arguments validate loads its schema and runs;
// a later call of the same tool in the same turn is then validated like
// any call of a fetched tool: wrong arguments are invalid_args naming the
// field, not a second schema handshake.
func TestAutoLoadedSchemaCountsForTheRestOfTheTurn(t *testing.T) {
	h := newHarness(t, nil)
	r := h.dispatch(turn("s1", "r1",
		call("a", "echo", `{"x":"1"}`),
		call("b", "echo", `{"x":5}`),
		call("c", "echo", `{"x":"2"}`)))
	if diff := cmp.Diff([]string{"a=ok", "b=invalid_args", "c=ok"}, statuses(r)); diff != "" {
		t.Fatalf("statuses (-want +got):\n%s", diff)
	}
	if got := r.Messages[1].Content; !strings.Contains(got, "x") || strings.Contains(got, "first time you call it") {
		t.Errorf("b: %s, want the field named and no schema handshake", got)
	}

	// A tool whose first call in the turn does not validate still hands
	// its schema over (nothing ran, nothing was loaded).
	r = h.dispatch(turn("s2", "r1",
		call("a", "echo", `{"x":5}`),
		call("b", "echo", `{"x":6}`)))
	if diff := cmp.Diff([]string{"a=schema_returned", "b=schema_returned"}, statuses(r)); diff != "" {
		t.Fatalf("statuses without a loaded schema (-want +got):\n%s", diff)
	}
}
