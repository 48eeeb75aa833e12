package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestTurnOverTheArgumentLimitIsRefused: a turn whose arguments total more
// than a turn may carry (64 MiB: 4096 calls of up to 1 MiB each would be
// 4 GiB) is refused as a bad request before anything runs or is stored.
func TestTurnOverTheArgumentLimitIsRefused(t *testing.T) {
	h := newHarness(t, nil)
	arg := func(i int) string { return fmt.Sprintf(`{"x":"%02d%s"}`, i, strings.Repeat("a", 1<<20-16)) }
	tr := turn("s1", "r1")
	for i := range 65 {
		tr.Message.ToolCalls = append(tr.Message.ToolCalls, call(fmt.Sprintf("c%d", i), "echo", arg(i)))
	}
	r, err := h.d.Dispatch(context.Background(), tr)
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(fmt.Sprint(err), "split the calls") {
		t.Fatalf("Dispatch = %d messages, %.300v; want ErrBadRequest naming the limit", len(r.GetMessages()), err)
	}
	if len(fmt.Sprint(err)) > 300 {
		t.Errorf("the error carries more than the sizes: %.300s", err)
	}
	if n := h.p.runs["c0"]; n != 0 {
		t.Errorf("c0 ran %d times", n)
	}
	turns, err := h.store.Turns(context.Background(), "s1")
	if err != nil || len(turns) != 0 {
		t.Errorf("stored %d turns, %v", len(turns), err)
	}
	// 64 calls of 1 MiB fit.
	tr.Message.ToolCalls = tr.Message.ToolCalls[:64]
	if r := h.dispatch(tr); len(r.Messages) != 64 || r.Messages[63].Status != "ok" {
		t.Errorf("64 calls of 1 MiB: %d messages, last %v", len(r.Messages), statuses(r)[63:])
	}
}
