package integration

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// registerScenarioTools adds the two tools whose faults the built-in tools
// cannot produce on demand: a slow concurrent tool and one that panics.
func registerScenarioTools(reg *toolkit.Registry) {
	reg.Register(toolkit.Tool{
		Name: "slow_echo", Description: "Wait ms milliseconds, then echo text.", Concurrent: true, ReadOnly: true,
		Timeout: 200 * time.Millisecond,
		Schema:  json.RawMessage(`{"type":"object","properties":{"ms":{"type":"integer","minimum":0},"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`),
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			select {
			case <-time.After(time.Duration(c.Args.Int("ms", 0)) * time.Millisecond):
				return toolkit.Result{Content: c.Args.String("text")}, nil
			case <-ctx.Done():
				return toolkit.Result{}, ctx.Err()
			}
		},
	})
	reg.Register(toolkit.Tool{
		Name: "explode", Description: "Panic with the given text.", Concurrent: true, ReadOnly: true,
		Schema:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"additionalProperties":false}`),
		Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) { panic("explode: kaboom") },
	})
}
