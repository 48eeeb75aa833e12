package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// embedderMain is a program of another module that embeds the dispatcher
// with three tools of its own: a typed Go tool, an eino tool and a tool of
// an in-process MCP server, all in the array under the default provider.
const embedderMain = `package main

import (
	"context"
	"fmt"

	"github.com/cloudwego/eino/components/tool/utils"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/einotool"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp"
)

type addIn struct {
	A int ` + "`json:\"a\"`" + `
	B int ` + "`json:\"b\"`" + `
}

type cityIn struct {
	City string ` + "`json:\"city\"`" + `
}

func main() {
	ctx := context.Background()
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)

	reg.Register(toolkit.Typed(toolkit.Tool{Name: "add", Description: "Adds two integers.",
		Concurrent: true, ReadOnly: true, AlwaysInArray: true},
		func(ctx context.Context, in addIn) (int, error) { return in.A + in.B, nil }))

	inv, err := utils.InferTool("weather", "Weather of a city.", func(ctx context.Context, in cityIn) (string, error) {
		return in.City + ": sunny", nil
	})
	if err != nil {
		panic(err)
	}
	et, err := einotool.New(ctx, inv, toolkit.Tool{Concurrent: true, ReadOnly: true, AlwaysInArray: true})
	if err != nil {
		panic(err)
	}
	reg.Register(et)

	srv := sdk.NewServer(&sdk.Implementation{Name: "inventory", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "stock", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in cityIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "7 units in " + in.City}}}, nil, nil
		})
	m := mcp.NewManager(reg, []mcp.ServerConfig{{Name: "inventory", Server: srv, Trusted: true, AlwaysInArray: true}}, zerolog.Nop())
	if err := m.Start(ctx); err != nil {
		panic(err)
	}
	defer m.Close()

	store := cachestore.NewMemory()
	defer store.Close()
	d, err := actors.New(actors.Config{Registry: reg, Store: store})
	if err != nil {
		panic(err)
	}
	defer d.Close(ctx)

	for _, msg := range []*messages.AssistantMessage{
		messages.NewTurn(
			messages.NewCall("c1", "add", map[string]any{"a": 2, "b": 3}),
			messages.NewCall("c2", "weather", map[string]any{"city": "Oslo"}),
			messages.NewCall("c3", "mcp__inventory__stock", map[string]any{"city": "Bergen"})),
		messages.NewTurn(messages.NewCall("c4", "add", map[string]any{"a": "two", "b": 3})),
	} {
		res, err := d.Dispatch(ctx, &messages.DispatchTurn{Session: "s1", Run: "r1", Message: msg})
		if err != nil {
			panic(err)
		}
		for _, r := range res.Messages {
			fmt.Printf("%s %s %s %q\n", r.ToolCallId, r.Name, r.Status, r.Content)
		}
	}
}
`

// TestSeparateModuleEmbeds writes a module of its own under a temporary
// directory, with replace directives to this repository, and runs it: a
// typed tool, an eino tool and an in-process MCP tool all run ok in one turn
// under the default provider, and a wrong-typed call to the typed tool gets
// invalid_args naming the field. It needs the module cache (or proxy) for
// eino and the go-sdk.
func TestSeparateModuleEmbeds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a separate module")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/embedder\n\ngo 1.26.0\n\n" +
		"require (\n\tgithub.com/tooldispatch/tooldispatch v0.0.0-00010101000000-000000000000\n" +
		"\tgithub.com/tooldispatch/tooldispatch/toolkit/einotool v0.0.0-00010101000000-000000000000\n)\n\n" +
		"replace github.com/tooldispatch/tooldispatch => " + root + "\n\n" +
		"replace github.com/tooldispatch/tooldispatch/toolkit/einotool => " + filepath.Join(root, "toolkit", "einotool") + "\n"
	for name, content := range map[string]string{"go.mod": gomod, "main.go": embedderMain} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	out := run("run", ".")
	t.Logf("the embedder's output:\n%s", out)
	for _, want := range []string{
		`c1 add ok "5"`,
		`c2 weather ok "Oslo: sunny"`,
		`c3 mcp__inventory__stock ok "7 units in Bergen"`,
		`c4 add invalid_args "invalid arguments: field \"a\": want integer, got string"`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("the output lacks %s", want)
		}
	}
}
