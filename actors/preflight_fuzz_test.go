package actors

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// fuzzEnv is one dispatcher over an in-memory store, renewed every
// fuzzRenew turns so that the store does not grow without bound.
type fuzzEnv struct {
	d       *Dispatcher
	turns   int
	mutated atomic.Int64 // executions of non-read-only calls
}

const fuzzRenew = 2000

var (
	fuzzMu  sync.Mutex
	fuzzCur *fuzzEnv
)

func fuzzRegistry(fe *fuzzEnv) *toolkit.Registry {
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	schema := json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"},"n":{"type":"integer"},"method":{"type":"string"}},"additionalProperties":false}`)
	reg.Register(toolkit.Tool{Name: "echo", Description: "Echo.", Schema: schema, Concurrent: true, ReadOnly: true,
		Handler: func(_ context.Context, c *toolkit.Call) (toolkit.Result, error) {
			return toolkit.Result{Content: string(c.Args.Canonical)}, nil
		}})
	reg.Register(toolkit.Tool{Name: "mutate", Description: "Changes things.", Schema: schema,
		Handler: func(_ context.Context, c *toolkit.Call) (toolkit.Result, error) {
			fe.mutated.Add(1)
			return toolkit.Result{Content: "mutated"}, nil
		}})
	reg.Register(toolkit.Tool{Name: "request", Description: "Read-only for GET only.", Schema: schema, Concurrent: true,
		ReadOnlyFunc: func(a toolkit.Args) bool { m := a.String("method"); return m == "" || m == "GET" },
		Handler: func(_ context.Context, c *toolkit.Call) (toolkit.Result, error) {
			if m := c.Args.String("method"); m != "" && m != "GET" {
				fe.mutated.Add(1)
			}
			return toolkit.Result{Content: "requested"}, nil
		}})
	return reg
}

func fuzzDispatcher(f *testing.F) *fuzzEnv {
	fuzzMu.Lock()
	defer fuzzMu.Unlock()
	if fuzzCur != nil && fuzzCur.turns < fuzzRenew {
		fuzzCur.turns++
		return fuzzCur
	}
	if fuzzCur != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = fuzzCur.d.Close(ctx)
		cancel()
	}
	fe := &fuzzEnv{}
	d, err := New(Config{Registry: fuzzRegistry(fe), Store: cachestore.NewMemory(), MaxConcurrency: 3,
		Limits: toolkit.Limits{MaxBytes: 64 << 10, MaxDepth: 32}, MaxCallsPerTurn: 64})
	if err != nil {
		f.Fatal(err)
	}
	fe.d = d
	fuzzCur = fe
	return fe
}

var fuzzStatuses = map[string]bool{
	"ok": true, "error": true, "timeout": true, "canceled": true, "outcome_unknown": true, "unknown_tool": true,
	"deferred": true, "schema_returned": true, "invalid_args": true, "deduped": true, "skipped": true, "client_pending": true,
}

// FuzzPreflightTurn runs whole turns through the dispatcher. The calls are
// lines "id<TAB>name<TAB>arguments"; flags picks the approval policy,
// provider and AutoLoadSchemas. Every call must get exactly one result, in
// call order, with a SPEC §9 status, and no call that is not read-only may
// run unless the policy is "all".
func FuzzPreflightTurn(f *testing.F) {
	seeds := []struct {
		calls string
		flags uint8
	}{
		{"c1\techo\t{\"x\":\"a\"}", 0},
		{"c1\techo\t{\"x\":\"a\"}\nc2\techo\t{\"x\":\"a\"}\nc3\techo\t{\"x\":\"b\"}", 4},
		{"c1\tmutate\t{}\nc2\trun_tool\t{\"name\":\"mutate\",\"arguments\":{}}", 0},
		{"c1\trun_tool\t{\"name\":\"run_tool\",\"arguments\":{\"name\":\"mutate\",\"arguments\":\"{}\"}}", 1},
		{"c1\tmutate<|channel|>x\t{}\n\tmutate\t{\"x\":1}\nc1\techo\t", 0},
		{"c1\tfind_tools\t{\"query\":\"select:mutate,request\"}\nc2\trequest\t{\"method\":\"POST\"}\nc3\trequest\t{\"method\":\"GET\"}", 2},
		{"c1\tmutate\t{\"x\":\"a\",\"X\":\"b\"}\nc2\tmutate\t{\"x\":\"a\",\"x\":\"b\"}\nc3\tmutate\t[1]", 0},
		{"c1\tm\u200butate\t{}\nc2\tｍutate\t{}\nc3\tMUTATE\t{}", 0},
		{"c1\techo\t" + strings.Repeat("[", 40) + strings.Repeat("]", 40), 0},
		{"c1\trequest\t{\"method\":\"get\"}\nc2\trequest\t{\"method\":\"DELETE\",\"read_only\":true}", 6},
	}
	for _, s := range seeds {
		f.Add(s.calls, s.flags)
	}
	f.Cleanup(func() {
		fuzzMu.Lock()
		defer fuzzMu.Unlock()
		if fuzzCur != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = fuzzCur.d.Close(ctx)
			cancel()
			fuzzCur = nil
		}
	})
	f.Fuzz(func(t *testing.T, calls string, flags uint8) {
		fe := fuzzDispatcher(f)
		var tcs []*messages.ToolCall
		for i, line := range strings.Split(calls, "\n") {
			if i >= 40 {
				break
			}
			parts := strings.SplitN(line, "\t", 3)
			for len(parts) < 3 {
				parts = append(parts, "")
			}
			tcs = append(tcs, &messages.ToolCall{Id: parts[0], Type: "function", Function: &messages.FunctionCall{Name: parts[1], Arguments: parts[2]}})
		}
		approve := []string{ApproveNone, ApproveAll, ApproveAsk, ApproveNone}[flags&3]
		provider := "openai"
		if flags&4 != 0 {
			provider = toolkit.ProviderClaudeCode
		}
		tr := &messages.DispatchTurn{Session: "fuzz", Run: "r" + string(rune('a'+flags%7)), Provider: provider, Approve: approve,
			AutoLoadSchemas: flags&8 != 0, Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: tcs}}
		before := fe.mutated.Load()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := fe.d.Dispatch(ctx, tr)
		if err != nil {
			t.Fatalf("dispatch: %v", err)
		}
		if len(r.Messages) != len(tcs) {
			t.Fatalf("%d results for %d calls", len(r.Messages), len(tcs))
		}
		for i, m := range r.Messages {
			if !fuzzStatuses[m.Status] {
				t.Fatalf("call %d: status %q not in SPEC §9", i, m.Status)
			}
			if id := strings.TrimSpace(tcs[i].Id); id != "" && m.ToolCallId != id {
				t.Fatalf("result %d answers %q, want %q (call order)", i, m.ToolCallId, id)
			}
			if m.ToolCallId == "" {
				t.Fatalf("result %d has no call id", i)
			}
		}
		if approve != ApproveAll && fe.mutated.Load() != before {
			t.Fatalf("a call that is not read-only ran under approve %q", approve)
		}
	})
}
