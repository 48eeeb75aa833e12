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

// TestMaxTurnBytesIsConfigured: Config.MaxTurnBytes is the limit of the Go
// API (Dispatch and Prepare alike): a turn whose arguments total exactly
// the limit runs, one byte more is refused before anything runs. Out of
// bounds, the configuration is refused.
func TestMaxTurnBytesIsConfigured(t *testing.T) {
	const limit = 3 << 10
	h := newHarness(t, func(c *Config) { c.MaxTurnBytes = limit })
	args := func(c byte, n int) string { return `{"x":"` + strings.Repeat(string(c), n-len(`{"x":""}`)) + `"}` }
	tr := turn("s1", "r1", call("c1", "echo", args('a', limit/2)), call("c2", "echo", args('b', limit/2)))
	if r := h.dispatch(tr); len(r.Messages) != 2 || r.Messages[1].Status != "ok" {
		t.Errorf("a turn at the limit: %v", statuses(r))
	}
	tr = turn("s1", "r2", call("c3", "echo", args('a', limit/2)), call("c4", "echo", args('b', limit/2+1)))
	want := fmt.Sprintf("the turn's arguments total %d bytes, more than the %d a turn may carry", limit+1, limit)
	if _, err := h.d.Prepare(tr); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), want) {
		t.Errorf("Prepare of a turn one byte over: %v", err)
	}
	if _, err := h.d.Dispatch(context.Background(), tr); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), want) {
		t.Errorf("Dispatch of a turn one byte over: %v", err)
	}
	if n := h.p.count("c3"); n != 0 {
		t.Errorf("a call of the refused turn ran %d times", n)
	}
	for _, bad := range []int{-1, 256<<20 + 1} {
		c := Config{Registry: testRegistry(newProbe()), Store: h.store, MaxTurnBytes: bad}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "MaxTurnBytes") {
			t.Errorf("MaxTurnBytes %d: %v", bad, err)
		}
	}
}
