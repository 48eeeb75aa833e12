package actors

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

func noopRegistry() *toolkit.Registry {
	reg := toolkit.NewRegistry()
	reg.Register(toolkit.Tool{Name: "noop", Description: "Does nothing.", Concurrent: true, ReadOnly: true,
		Schema: []byte(`{"type":"object","properties":{"i":{"type":"integer"}},"required":["i"],"additionalProperties":false}`),
		Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) {
			return toolkit.Result{Content: "ok"}, nil
		}})
	return reg
}

// noopTurn is a turn of n distinct no-op calls (distinct arguments, so
// de-duplication does not shorten it).
func noopTurn(session string, turn, n int) *messages.DispatchTurn {
	calls := make([]*messages.ToolCall, n)
	for i := range calls {
		calls[i] = &messages.ToolCall{Id: fmt.Sprintf("c%d", i), Type: "function",
			Function: &messages.FunctionCall{Name: "noop", Arguments: fmt.Sprintf(`{"i":%d}`, turn*n+i)}}
	}
	return &messages.DispatchTurn{Session: session, Run: "bench", Provider: toolkit.ProviderClaudeCode, AutoLoadSchemas: true,
		Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: calls}}
}

// BenchmarkTurn100NoOp dispatches 100-call turns of a no-op concurrent tool
// (limit 3) and reports the cost per call, with an in-memory store and with
// Badger on disk.
func BenchmarkTurn100NoOp(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) cachestore.Store
	}{
		{"memory", func(*testing.B) cachestore.Store { return cachestore.NewMemory() }},
		{"badger", func(b *testing.B) cachestore.Store {
			s, err := badger.Open(badger.Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			store := st.open(b)
			d, err := New(Config{Registry: noopRegistry(), Store: store, MaxConcurrency: 3})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := d.Dispatch(ctx, noopTurn("bench", i, 100)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/call")
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_ = d.Close(cctx)
			_ = store.Close()
		})
	}
}
