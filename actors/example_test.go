package actors_test

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// A dispatcher that owns its actor system: register tools, open a store,
// dispatch a turn.
func ExampleNew() {
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	builtin.Register(reg, builtin.Deps{}) // calculate, write_todo, reasoning_guide
	store := cachestore.NewMemory()       // cachestore.OpenBadger for a durable one
	defer store.Close()

	d, err := actors.New(actors.Config{Registry: reg, Store: store})
	if err != nil {
		panic(err)
	}
	defer d.Close(context.Background())

	res, err := d.Dispatch(context.Background(), &messages.DispatchTurn{
		Session: "s1", Run: "r1", Provider: "openai",
		Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: []*messages.ToolCall{
			{Id: "c1", Type: "function", Function: &messages.FunctionCall{Name: "find_tools", Arguments: `{"query":"select:calculate"}`}},
		}},
	})
	if err != nil {
		panic(err)
	}
	res, err = d.Dispatch(context.Background(), &messages.DispatchTurn{
		Session: "s1", Run: "r1", Provider: "openai",
		Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: []*messages.ToolCall{
			{Id: "c2", Type: "function", Function: &messages.FunctionCall{Name: "run_tool", Arguments: `{"name":"calculate","arguments":{"expression":"6*7"}}`}},
		}},
	})
	if err != nil {
		panic(err)
	}
	for _, m := range res.Messages {
		fmt.Println(m.ToolCallId, m.Name, m.Status, m.Content)
	}
	// Output: c2 calculate ok 42
}

// A dispatcher spawned inside the caller's own actor system; the caller's
// actors talk to it with messages.
func ExampleSpawn() {
	system := actor.NewActorSystem()
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	builtin.Register(reg, builtin.Deps{})
	store := cachestore.NewMemory()
	defer store.Close()

	d, err := actors.Spawn(system.Root, actors.Config{Registry: reg, Store: store})
	if err != nil {
		panic(err)
	}
	turn := &messages.DispatchTurn{
		Session: "s1", Provider: toolkit.ProviderClaudeCode, AutoLoadSchemas: true,
		Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: []*messages.ToolCall{
			{Id: "c1", Type: "function", Function: &messages.FunctionCall{Name: "calculate", Arguments: `{"expression":"2**10"}`}},
		}},
	}
	res, err := system.Root.RequestFuture(d.PID(), turn, 10*time.Second).Result()
	if err != nil {
		panic(err)
	}
	r := res.(*messages.TurnResult)
	fmt.Println(r.Turn, r.Messages[0].Status, r.Messages[0].Content)
	_ = d.Close(context.Background())
	system.Shutdown()
	// Output: 1 ok 1024
}
