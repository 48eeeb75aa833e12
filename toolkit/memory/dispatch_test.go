package memory_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/memory"
)

// memoryDispatcher is a real dispatcher over a real Badger store whose
// read_files always fails with a permission error, and the error memory
// built with opts.
func memoryDispatcher(t *testing.T, opts ...memory.Option) func(session, id, name, args string) *messages.ToolMessage {
	t.Helper()
	store, err := badger.Open(badger.TestOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	mem := memory.New(store, t.TempDir(), opts...)
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	mem.Register(reg)
	reg.Register(toolkit.Tool{
		Name: "read_files", Description: "test double", Concurrent: true, ReadOnly: true,
		Schema: []byte(`{"type":"object","properties":{"paths":{"type":"array","items":{"type":"string"}}},"additionalProperties":false}`),
		Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) {
			return toolkit.Result{}, errors.New("open config.yaml: permission denied")
		},
	})
	d, err := actors.New(actors.Config{Registry: reg, Store: store, PastFixes: mem.PastFixes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	return func(session, id, name, args string) *messages.ToolMessage {
		t.Helper()
		res, err := d.Dispatch(context.Background(), &messages.DispatchTurn{
			Session: session, Run: "r1", Provider: toolkit.ProviderClaudeCode, AutoLoadSchemas: true,
			Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: []*messages.ToolCall{
				{Id: id, Type: "function", Function: &messages.FunctionCall{Name: name, Arguments: args}},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return res.Messages[0]
	}
}

// Through a real dispatcher: the model records a fix with write_error, and
// a later failure of the same tool shows it before the next: line.
func TestPastFixesThroughDispatcher(t *testing.T) {
	dispatch := memoryDispatcher(t)
	turn := func(id, name, args string) *messages.ToolMessage { return dispatch("s1", id, name, args) }
	if m := turn("c1", "write_error", `{"tool":"read_files","symptom":"permission denied","action":"run chmod via run_command first","outcome":"resolved"}`); m.Status != "ok" {
		t.Fatalf("write_error: %s %s", m.Status, m.Content)
	}
	m := turn("c2", "read_files", `{"paths":["config.yaml"]}`)
	want := `- E1 (read_files): "permission denied" → "run chmod via run_command first"`
	if m.Status != "error" || !strings.Contains(m.Content, want) || !strings.Contains(m.Content, "\nnext: ") {
		t.Errorf("failed call's text lacks the past fix %q:\n%s", want, m.Content)
	}
	if strings.Index(m.Content, want) > strings.Index(m.Content, "\nnext: ") {
		t.Errorf("the past fix must come before the next: line:\n%s", m.Content)
	}
	// chat_history finds both turns.
	m = turn("c3", "chat_history", `{"query":"permission denied"}`)
	for _, w := range []string{"[turn 2] result read_files #c2 (error): open config.yaml: permission denied", "[turn 1] call write_error #c1"} {
		if !strings.Contains(m.Content, w) {
			t.Errorf("chat_history lacks %q:\n%s", w, m.Content)
		}
	}
}
