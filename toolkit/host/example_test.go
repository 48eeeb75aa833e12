package host_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/host"
)

// An embedding program supplies a subagents handler (here one that only
// echoes the tasks; a real one would start model runs) and the dispatcher
// runs the model's call of it.
func ExampleRegister() {
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	host.Register(reg, host.Handlers{
		Subagents: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			tasks, _ := c.Args.Value["tasks"].([]any)
			var out []string
			for i, t := range tasks {
				task, _ := t.(map[string]any)["task"].(string)
				out = append(out, fmt.Sprintf("subagent %d done: %s", i+1, task))
			}
			return toolkit.Result{Content: strings.Join(out, "; ")}, nil
		},
	})
	store := cachestore.NewMemory()
	defer store.Close()
	d, err := actors.New(actors.Config{Registry: reg, Store: store})
	if err != nil {
		panic(err)
	}
	defer d.Close(context.Background())

	res, err := d.Dispatch(context.Background(), &messages.DispatchTurn{
		Session: "s1", Run: "r1", Provider: toolkit.ProviderClaudeCode, AutoLoadSchemas: true,
		// subagents is not read-only: this run approves every call.
		Approve: actors.ApproveAll,
		Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: []*messages.ToolCall{
			{Id: "c1", Type: "function", Function: &messages.FunctionCall{Name: "subagents",
				Arguments: `{"tasks":[{"task":"summarise README.md"},{"task":"list open TODOs"}]}`}},
		}},
	})
	if err != nil {
		panic(err)
	}
	for _, m := range res.Messages {
		fmt.Println(m.ToolCallId, m.Name, m.Status, m.Content)
	}
	// Output: c1 subagents ok subagent 1 done: summarise README.md; subagent 2 done: list open TODOs
}
