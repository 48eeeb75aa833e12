package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
)

func chaosJSON(t *testing.T, p *chaos.Policy) string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestChaosSameSeedSameFaults: the faults of a run depend on the seed and
// the calls' positions only, not on the concurrency limit or scheduling.
func TestChaosSameSeedSameFaults(t *testing.T) {
	policy := &chaos.Policy{Seed: 1234, Rules: []chaos.Rule{{Tools: []string{"echo"}, Faults: []chaos.Fault{
		{Kind: chaos.KindError, Probability: 0.2, Text: "boom"},
		{Kind: chaos.KindTruncate, Probability: 0.2, Fraction: 0.5},
		{Kind: chaos.KindLatency, Probability: 0.2, Min: chaos.Duration{Duration: time.Millisecond}, Max: chaos.Duration{Duration: 5 * time.Millisecond}},
	}}}}
	var first []string
	for _, limit := range []int{1, 3, 7} {
		h := newHarness(t, func(c *Config) { c.MaxConcurrency = limit })
		var calls []*messages.ToolCall
		for i := 0; i < 40; i++ {
			calls = append(calls, call(fmt.Sprintf("c%02d", i), "echo", fmt.Sprintf(`{"ms":%d,"x":"%d"}`, i%4, i)))
		}
		tr := turn("s1", "chaos-run", calls...)
		tr.Chaos = chaosJSON(t, policy)
		r := h.dispatch(tr)
		var got []string
		injected := 0
		for _, m := range r.Messages {
			got = append(got, m.ToolCallId+"="+m.Status+"/"+m.Injected)
			if m.Injected != "" {
				injected++
			}
		}
		if injected == 0 || injected == len(r.Messages) {
			t.Fatalf("limit %d: %d of %d calls injected; the policy should hit some", limit, injected, len(r.Messages))
		}
		if first == nil {
			first = got
			continue
		}
		if diff := cmp.Diff(first, got); diff != "" {
			t.Fatalf("limit %d gave other faults (-limit 1 +limit %d):\n%s", limit, limit, diff)
		}
	}
}

// TestChaosNeverCachedOrDeduped: an injected result is not reused by
// de-duplication and not written to the result cache.
func TestChaosNeverCachedOrDeduped(t *testing.T) {
	h := newHarness(t, nil)
	h.d.cfg.Registry.Register(toolkit.Tool{Name: "cached", Description: "Returns a cache entry.", Concurrent: true, ReadOnly: true,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			h.p.enter(c.ID)
			defer h.p.leave(c.ID)
			return toolkit.Result{Content: "fresh value", Cache: &toolkit.CacheEntry{Key: "k|" + c.ID, Value: []byte("fresh value"), Expires: time.Now().Add(time.Hour)}}, nil
		}})
	trunc := &chaos.Policy{Seed: 1, Rules: []chaos.Rule{{Tools: []string{"cached"}, Faults: []chaos.Fault{{Kind: chaos.KindTruncate, Probability: 1, Fraction: 0.5}}}}}
	tr := turn("s1", "r1", call("a", "cached", `{}`))
	tr.Chaos = chaosJSON(t, trunc)
	r := h.dispatch(tr)
	if m := r.Messages[0]; m.Injected != "truncate" || m.Content != "fresh" {
		t.Fatalf("injected message = %+v", m)
	}
	if _, ok, _ := h.store.CacheGet(context.Background(), "k|a", time.Now()); ok {
		t.Fatal("an injected result reached the cache")
	}
	// The same call again, without chaos: it runs (not deduped from the
	// injected result) and its real result is cached.
	r = h.dispatch(turn("s1", "r1", call("b", "cached", `{}`)))
	if m := r.Messages[0]; m.Status != "ok" || m.Injected != "" || m.Content != "fresh value" {
		t.Fatalf("real call after an injected one = %+v", m)
	}
	if _, ok, _ := h.store.CacheGet(context.Background(), "k|b", time.Now()); !ok {
		t.Fatal("the real result was not cached")
	}
	if h.p.count("b") != 1 {
		t.Fatal("the repeat did not run")
	}
}

// TestChaosMutatingToolNeverRuns: a fault that replaces the run leaves a
// mutating tool untouched, and a denied confirmation is marked injected.
func TestChaosMutatingToolNeverRuns(t *testing.T) {
	h := newHarness(t, nil)
	policy := &chaos.Policy{Seed: 9, Rules: []chaos.Rule{
		{Tools: []string{"write"}, Faults: []chaos.Fault{{Kind: chaos.KindHTTP, Status: 503, Probability: 1}}},
	}}
	tr := turn("s1", "r1", call("w1", "write", `{"path":"a"}`), call("w2", "write", `{"path":"b"}`))
	tr.Chaos = chaosJSON(t, policy)
	r := h.dispatch(tr)
	for _, m := range r.Messages {
		if m.Status != "error" || m.Injected != "http_503" {
			t.Fatalf("message %+v", m)
		}
	}
	if h.p.count("w1")+h.p.count("w2") != 0 {
		t.Fatal("a mutating tool ran under an injected fault")
	}
	deny := &chaos.Policy{Seed: 9, Rules: []chaos.Rule{{Tools: []string{"write"}, Faults: []chaos.Fault{{Kind: chaos.KindDeny, Probability: 1}}}}}
	tr = turn("s1", "r2", call("w3", "write", `{"path":"c"}`))
	tr.Chaos = chaosJSON(t, deny)
	r = h.dispatch(tr)
	if m := r.Messages[0]; m.Status != "skipped" || m.Injected != "deny" {
		t.Fatalf("denied message %+v", m)
	}
	if h.p.count("w3") != 0 {
		t.Fatal("a denied call ran")
	}
	var marked bool
	h.mu.Lock()
	for _, e := range h.events {
		if e.CallId == "w3" && e.Kind == EventToolSkipped && e.Injected == "deny" {
			marked = true
		}
	}
	h.mu.Unlock()
	if !marked {
		t.Fatal("the tool_skipped event does not carry the injected fault")
	}
}
