package einotool_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/schema"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/einotool"
)

type weatherIn struct {
	City string `json:"city" jsonschema:"description=the city"`
	Days int    `json:"days,omitempty"`
}

func weather(_ context.Context, in weatherIn) (string, error) {
	if in.City == "Atlantis" {
		return "", errors.New("no weather under the sea")
	}
	return fmt.Sprintf("%s: sunny for %d days", in.City, max(in.Days, 1)), nil
}

func forecast(_ context.Context, in weatherIn) (*schema.StreamReader[string], error) {
	return schema.StreamReaderFromArray([]string{in.City + ": ", "rain, ", "then sun"}), nil
}

func TestEinoTools(t *testing.T) {
	ctx := context.Background()
	inv, err := utils.InferTool("weather", "Weather of a city.", weather)
	if err != nil {
		t.Fatal(err)
	}
	str, err := utils.InferStreamTool("forecast", "Forecast of a city.", forecast)
	if err != nil {
		t.Fatal(err)
	}
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	wt, err := einotool.New(ctx, inv, toolkit.Tool{Concurrent: true, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if wt.Name != "weather" || wt.Description != "Weather of a city." || !wt.Concurrent {
		t.Errorf("tool = %s %q concurrent %v", wt.Name, wt.Description, wt.Concurrent)
	}
	reg.Register(wt)
	ft, err := einotool.New(ctx, str, toolkit.Tool{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	reg.Register(ft)

	store := cachestore.NewMemory()
	defer store.Close()
	var mu sync.Mutex
	var emitted []string
	d, err := actors.New(actors.Config{Registry: reg, Store: store, Events: func(e *messages.Event) {
		if e.Kind == "tool_call_text" {
			mu.Lock()
			emitted = append(emitted, e.Text)
			mu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(ctx)

	res, err := d.Dispatch(ctx, &messages.DispatchTurn{Session: "s1", Run: "r1", Provider: toolkit.ArrayAll, AutoLoadSchemas: true,
		Message: messages.NewTurn(
			messages.NewCall("c1", "weather", map[string]any{"city": "Oslo", "days": 2}),
			messages.NewCall("c3", "weather", map[string]any{"city": "Atlantis"}),
			messages.NewCall("c4", "forecast", map[string]any{"city": "Bergen"}),
		)})
	if err != nil {
		t.Fatal(err)
	}
	// Once the schema is known in the run, a wrong-typed call is refused
	// before the eino tool runs.
	res2, err := d.Dispatch(ctx, &messages.DispatchTurn{Session: "s1", Run: "r1", Provider: toolkit.ArrayAll, AutoLoadSchemas: true,
		Message: messages.NewTurn(messages.NewCall("c2", "weather", map[string]any{"city": 42}))})
	if err != nil {
		t.Fatal(err)
	}
	res.Messages = append(res.Messages[:1], append(res2.Messages, res.Messages[1:]...)...)
	want := []struct{ status, content string }{
		{"ok", "Oslo: sunny for 2 days"},
		{"invalid_args", "city"},
		{"error", "no weather under the sea"},
		{"ok", "Bergen: rain, then sun"},
	}
	for i, m := range res.Messages {
		if m.Status != want[i].status || !strings.Contains(m.Content, want[i].content) {
			t.Errorf("%s: %s %q; want %s containing %q", m.ToolCallId, m.Status, m.Content, want[i].status, want[i].content)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(emitted, "|"); got != "Bergen: |rain, |then sun" {
		t.Errorf("streamed chunks %q", got)
	}
}

// An eino tool made with utils.InferTool, dispatched by tooldispatch: the
// schema comes from the eino tool's Info, so a wrong-typed argument is
// refused before the tool runs.
func ExampleNew() {
	ctx := context.Background()
	inv, err := utils.InferTool("weather", "Weather of a city.", weather)
	if err != nil {
		panic(err)
	}
	t, err := einotool.New(ctx, inv, toolkit.Tool{Concurrent: true, ReadOnly: true})
	if err != nil {
		panic(err)
	}
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	reg.Register(t)
	store := cachestore.NewMemory()
	defer store.Close()
	d, err := actors.New(actors.Config{Registry: reg, Store: store})
	if err != nil {
		panic(err)
	}
	defer d.Close(ctx)

	for _, c := range []*messages.ToolCall{
		messages.NewCall("c1", "weather", map[string]any{"city": "Oslo"}),
		messages.NewCall("c2", "weather", map[string]any{"city": 42}),
	} {
		res, err := d.Dispatch(ctx, &messages.DispatchTurn{Session: "s1", Run: "r1", Provider: toolkit.ArrayAll,
			AutoLoadSchemas: true, Message: messages.NewTurn(c)})
		if err != nil {
			panic(err)
		}
		m := res.Messages[0]
		fmt.Println(m.ToolCallId, m.Status, m.Content)
	}
	// Output:
	// c1 ok Oslo: sunny for 1 days
	// c2 invalid_args invalid arguments: field "city": want string, got number
}
