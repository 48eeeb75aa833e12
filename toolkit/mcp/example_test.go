package mcp_test

import (
	"context"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp"
)

type stockIn struct {
	Item string `json:"item" jsonschema:"the item to count"`
}

// A go-sdk server of the embedding program, attached in process: its tools
// become mcp__inventory__<tool> and run under the same rules as any MCP
// server's (alone; without approval only when the server is trusted and the
// tool declares readOnlyHint).
func ExampleServerConfig_inProcess() {
	srv := sdk.NewServer(&sdk.Implementation{Name: "inventory", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "stock", Description: "Units in stock.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in stockIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Item + ": 7 units"}}}, nil, nil
		})

	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	m := mcp.NewManager(reg, []mcp.ServerConfig{{Name: "inventory", Server: srv, Trusted: true}}, zerolog.Nop())
	if err := m.Start(context.Background()); err != nil {
		panic(err)
	}
	defer m.Close()
	store := cachestore.NewMemory()
	defer store.Close()
	d, err := actors.New(actors.Config{Registry: reg, Store: store})
	if err != nil {
		panic(err)
	}
	defer d.Close(context.Background())

	res, err := d.Dispatch(context.Background(), &messages.DispatchTurn{
		Session: "s1", Provider: toolkit.ArrayAll, AutoLoadSchemas: true,
		Message: messages.NewTurn(messages.NewCall("c1", "mcp__inventory__stock", map[string]any{"item": "bolts"}))})
	if err != nil {
		panic(err)
	}
	for _, msg := range res.Messages {
		fmt.Println(msg.Name, msg.Status, msg.Content)
	}
	// Output: mcp__inventory__stock ok bolts: 7 units
}
