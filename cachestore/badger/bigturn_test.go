package badger

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
	"github.com/tooldispatch/tooldispatch/messages"
)

// TestBadgerTooBigErrorCarriesNoBytes: a value Badger cannot take (here in
// memory, where a transaction is limited to 15 % of the memtable) fails
// with ErrTooLarge and a message without the value's bytes.
func TestBadgerTooBigErrorCarriesNoBytes(t *testing.T) {
	b := mustOpen(t, TestOptions(""))
	ctx := context.Background()
	sh := storetest.BigShape{Name: "20_calls_of_900KB", Calls: 20, ArgBytes: 900 << 10}
	errs := []error{
		b.WriteIntent(ctx, storetest.BigIntent(sh, 1, nil)),
		b.CommitTurn(ctx, storetest.BigCommit(sh, 1)),
	}
	for i, err := range errs {
		if err == nil {
			t.Fatalf("write %d of 18 MB in memory succeeded", i)
		}
		if !errors.Is(err, cachestore.ErrTooLarge) {
			t.Errorf("write %d: error %.300v is not cachestore.ErrTooLarge", i, err)
		}
		msg := err.Error()
		// Badger's own message appends a hex dump of the value.
		if len(msg) > 400 || strings.Contains(msg, "61 61 61") || strings.Contains(msg, "aaaa") || strings.Contains(msg, "|{\"") {
			t.Errorf("write %d: the error carries the value's bytes (%d bytes of message):\n%.600s", i, len(msg), msg)
		}
	}
	if got := nextTurn(t, b, storetest.BigSession); got != 1 {
		t.Errorf("next turn after the refused commit = %d, want 1", got)
	}
}

func TestChunkedValueRoundTrip(t *testing.T) {
	b := mustOpen(t, TestOptions(t.TempDir()))
	ctx := context.Background()
	// Shrinking and growing rewrites of a chunked intent leave no stale
	// parts behind.
	for _, sh := range []storetest.BigShape{
		{Name: "a", Calls: 40, ArgBytes: 900 << 10},
		{Name: "b", Calls: 5, ArgBytes: 900 << 10},
		{Name: "c", Calls: 1, ArgBytes: 10},
	} {
		if err := b.WriteIntent(ctx, storetest.BigIntent(sh, 1, nil)); err != nil {
			t.Fatalf("WriteIntent %s: %v", sh.Name, err)
		}
	}
	big := storetest.BigShape{Name: "d", Calls: 30, ArgBytes: 900 << 10}
	if err := b.CommitTurn(ctx, storetest.BigCommit(big, 1)); err != nil {
		t.Fatal(err)
	}
	if n := countPrefix(t, b, prefixPart); n != len(chunks(make([]byte, protoSize(storetest.BigCommit(big, 1).Record)))) {
		t.Errorf("%d value parts stored, want only those of the turn record", n)
	}
	if n := countPrefix(t, b, prefixIntent); n != 0 {
		t.Errorf("%d intent keys left after the commit", n)
	}
	if diff := cmp.Diff(1, len(storetest.Turns(t, b, storetest.BigSession))); diff != "" {
		t.Error(diff)
	}
}

func protoSize(rec *messages.TurnRecord) int {
	raw, _, err := cachestore.MarshalValid(rec)
	if err != nil {
		panic(err)
	}
	return len(raw)
}
