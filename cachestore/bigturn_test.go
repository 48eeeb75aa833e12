package cachestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/google/go-cmp/cmp"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Helpers for the tests of how Badger splits and refuses big turns. The big
// turns every store must take (4096 calls; 20 calls of 900 KB) are
// cachestore/storetest.RunBig.

// bigShape is the shape of a big turn.
type bigShape struct {
	name     string
	calls    int
	argBytes int
}

// bigSession and bigRun look like the ids the command line makes.
const (
	bigSession = "default"
	bigRun     = "run-20260901T120000Z-0123456789abcdef"
)

// bigArgs is a JSON object of about n bytes, different for each call.
func bigArgs(i, n int) string {
	pad := max(n-40, 1)
	return fmt.Sprintf(`{"expression":"%d+1","pad":"%s"}`, i, strings.Repeat(string(rune('a'+i%26)), pad))
}

func bigAssistant(sh bigShape) *messages.AssistantMessage {
	a := &messages.AssistantMessage{Role: "assistant"}
	for i := range sh.calls {
		a.ToolCalls = append(a.ToolCalls, &messages.ToolCall{Id: fmt.Sprintf("c%d", i), Type: "function",
			Function: &messages.FunctionCall{Name: "calculate", Arguments: bigArgs(i, sh.argBytes)}})
	}
	return a
}

func bigIntent(sh bigShape, turn int64, started []int) *Intent {
	in := &Intent{Session: bigSession, Turn: turn, Run: bigRun, TurnID: "tid-" + sh.name, Provider: "openai",
		Assistant: bigAssistant(sh), Decided: map[int]*messages.ToolMessage{}, Started: started}
	for i := range sh.calls {
		in.Names = append(in.Names, "calculate")
		in.IDs = append(in.IDs, fmt.Sprintf("c%d", i))
	}
	return in
}

func bigCommit(sh bigShape, turn int64) *TurnCommit {
	rec := &messages.TurnRecord{Turn: turn, Run: bigRun, TurnId: "tid-" + sh.name, Provider: "openai",
		TimeUnixNano: 1_700_000_000_000_000_000, Assistant: bigAssistant(sh)}
	c := &TurnCommit{Session: bigSession, Record: rec, FetchedAdd: []string{"calculate"}}
	for i := range sh.calls {
		rec.ToolMessages = append(rec.ToolMessages, &messages.ToolMessage{Role: "tool", ToolCallId: fmt.Sprintf("c%d", i),
			Name: "calculate", Status: "ok", Content: fmt.Sprint(i + 1)})
		sum := sha256.Sum256([]byte("calculate|" + bigArgs(i, sh.argBytes)))
		c.DedupPut = append(c.DedupPut, &DedupEntry{Key: hex.EncodeToString(sum[:]), Tool: "calculate", Content: fmt.Sprint(i + 1)})
	}
	return c
}

// TestBadgerTooBigErrorCarriesNoBytes: a value Badger cannot take (here in
// memory, where a transaction is limited to 15 % of the memtable) fails
// with ErrTooLarge and a message without the value's bytes.
func TestBadgerTooBigErrorCarriesNoBytes(t *testing.T) {
	b := mustOpenBadger(t, TestOptions(""))
	ctx := context.Background()
	sh := bigShape{"20_calls_of_900KB", 20, 900 << 10}
	errs := []error{
		b.WriteIntent(ctx, bigIntent(sh, 1, nil)),
		b.CommitTurn(ctx, bigCommit(sh, 1)),
	}
	for i, err := range errs {
		if err == nil {
			t.Fatalf("write %d of 18 MB in memory succeeded", i)
		}
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("write %d: error %.300v is not ErrTooLarge", i, err)
		}
		msg := err.Error()
		// Badger's own message appends a hex dump of the value.
		if len(msg) > 400 || strings.Contains(msg, "61 61 61") || strings.Contains(msg, "aaaa") || strings.Contains(msg, "|{\"") {
			t.Errorf("write %d: the error carries the value's bytes (%d bytes of message):\n%.600s", i, len(msg), msg)
		}
	}
	if got := nextTurn(t, b, bigSession); got != 1 {
		t.Errorf("next turn after the refused commit = %d, want 1", got)
	}
}

func TestChunkedValueRoundTrip(t *testing.T) {
	b := mustOpenBadger(t, TestOptions(t.TempDir()))
	ctx := context.Background()
	// Shrinking and growing rewrites of a chunked intent leave no stale
	// parts behind.
	for _, sh := range []bigShape{{"a", 40, 900 << 10}, {"b", 5, 900 << 10}, {"c", 1, 10}} {
		if err := b.WriteIntent(ctx, bigIntent(sh, 1, nil)); err != nil {
			t.Fatalf("WriteIntent %s: %v", sh.name, err)
		}
	}
	if err := b.CommitTurn(ctx, bigCommit(bigShape{"d", 30, 900 << 10}, 1)); err != nil {
		t.Fatal(err)
	}
	if n := countPrefix(t, b, prefixPart); n != len(chunks(make([]byte, protoSize(bigCommit(bigShape{"d", 30, 900 << 10}, 1).Record)))) {
		t.Errorf("%d value parts stored, want only those of the turn record", n)
	}
	if n := countPrefix(t, b, prefixIntent); n != 0 {
		t.Errorf("%d intent keys left after the commit", n)
	}
	if diff := cmp.Diff(1, len(turns(t, b, bigSession))); diff != "" {
		t.Error(diff)
	}
}

func protoSize(rec *messages.TurnRecord) int {
	raw, _, err := MarshalValid(rec)
	if err != nil {
		panic(err)
	}
	return len(raw)
}
