package actors_test

import (
	"context"
	"fmt"
	"os"
	"strings"
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
	store := cachestore.NewMemory()       // badger.Open (cachestore/badger) for a durable one
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

// An Approver decides, from Go, which calls that change things may run: here
// edit_file is denied and run_command approved. It is called on a goroutine
// of its own, so it may block (on a human, on a policy service); no
// goroutine or channel of the caller's is needed.
func ExampleConfig_approver() {
	dir, err := os.MkdirTemp("", "workspace")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ws, err := builtin.OpenWorkspace(dir)
	if err != nil {
		panic(err)
	}
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	builtin.Register(reg, builtin.Deps{Workspace: ws}) // edit_file, run_command, read_files, ...
	store := cachestore.NewMemory()
	defer store.Close()

	d, err := actors.New(actors.Config{Registry: reg, Store: store,
		Approver: func(ctx context.Context, r actors.ApprovalRequest) (bool, string) {
			fmt.Printf("asked: %s %s\n", r.Tool, r.Args)
			if r.Tool == "edit_file" {
				return false, "no edits today"
			}
			return true, ""
		}})
	if err != nil {
		panic(err)
	}
	defer d.Close(context.Background())

	res, err := d.Dispatch(context.Background(), &messages.DispatchTurn{
		Session: "s1", Approve: actors.ApproveAsk,
		Provider: toolkit.ArrayAll, AutoLoadSchemas: true, // every tool in the array, called directly
		Message: messages.NewTurn(
			messages.NewCall("c1", "edit_file", map[string]any{"path": "notes.txt", "content": "hi"}),
			messages.NewCall("c2", "run_command", map[string]any{"argv": []string{"echo", "hello"}}),
		)})
	if err != nil {
		panic(err)
	}
	for _, m := range res.Messages {
		fmt.Println(m.ToolCallId, m.Name, m.Status, strings.Contains(m.Content, "no edits today"), strings.Contains(m.Content, "hello"))
	}
	// Output:
	// asked: edit_file {"content":"hi","path":"notes.txt"}
	// asked: run_command {"argv":["echo","hello"]}
	// c1 edit_file skipped true false
	// c2 run_command ok false true
}
