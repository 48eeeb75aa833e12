package toolkit_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// WeatherIn is the weather tool's input: its JSON Schema is generated from
// the struct (city is required, units optional because of omitempty).
type WeatherIn struct {
	City  string `json:"city" jsonschema:"the city, e.g. Oslo"`
	Units string `json:"units,omitempty" jsonschema:"celsius (default) or fahrenheit"`
}

// WeatherOut is what the model gets back, as JSON.
type WeatherOut struct {
	City  string  `json:"city"`
	TempC float64 `json:"temp_c"`
}

// A typed tool, end to end: the schema comes from WeatherIn, the handler gets
// a decoded WeatherIn, and a wrong-typed call never reaches it.
//
// Under the default tools-array policy (lazy: provider "openai" or none) an
// embedder's own tool is reached through find_tools and run_tool, and a
// direct call of it comes back deferred. AlwaysInArray lists it in the tools
// array beside the core tools, so the model calls it directly.
func ExampleTyped() {
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	reg.Register(toolkit.Typed(toolkit.Tool{Name: "weather", Description: "Current weather of a city.",
		Concurrent: true, ReadOnly: true, AlwaysInArray: true},
		func(ctx context.Context, in WeatherIn) (WeatherOut, error) {
			toolkit.Progress(ctx, "asking the weather service about "+in.City)
			return WeatherOut{City: in.City, TempC: 21.5}, nil
		}))
	store := cachestore.NewMemory()
	defer store.Close()
	d, err := actors.New(actors.Config{Registry: reg, Store: store})
	if err != nil {
		panic(err)
	}
	defer d.Close(context.Background())

	res, err := d.Dispatch(context.Background(), &messages.DispatchTurn{Session: "s1", Message: messages.NewTurn(
		messages.NewCall("c1", "weather", map[string]any{"city": "Oslo"}),
		messages.NewCall("c2", "weather", `{"city": 42}`),
	)})
	if err != nil {
		panic(err)
	}
	for _, m := range res.Messages {
		fmt.Println(m.ToolCallId, m.Status, strings.SplitN(m.Content, "\n", 2)[0])
	}
	// Output:
	// c1 ok {"city":"Oslo","temp_c":21.5}
	// c2 invalid_args invalid arguments: field "city": want string, got number
}
