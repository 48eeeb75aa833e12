package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestClientToolBadSchema: a client tool whose schema does not compile does
// not fail the view; it is kept with the reason, left out of the tools
// array, and find_tools shows why.
func TestClientToolBadSchema(t *testing.T) {
	reg := NewRegistry()
	RegisterMeta(reg)
	bad := ClientToolFromSpec("lookup_order", "Looks up an order.", `{"type":"object","properties":{"id":{"type":"string","minLength":"x"}}}`)
	good := ClientToolFromSpec("ping_client", "Pings.", `{"type":"object","properties":{"id":{"type":"string","pattern":"^(?!tmp_)"}}}`)
	v, err := NewView(reg, "openai", []*Tool{bad, good}, nil)
	if err != nil {
		t.Fatalf("NewView: %v", err)
	}
	tool, ok := v.Lookup("lookup_order")
	if !ok || !strings.Contains(tool.SchemaError, "minLength") {
		t.Fatalf("Lookup = %v, %v; want the tool with its schema error", tool, ok)
	}
	if !strings.Contains(v.ContextText(), "- lookup_order: (cannot be called: its schema does not compile)") {
		t.Errorf("context text does not mark the tool:\n%s", v.ContextText())
	}
	if v.InArray("lookup_order") || !v.InArray("ping_client") {
		t.Errorf("InArray: bad %v, good %v; want false, true", v.InArray("lookup_order"), v.InArray("ping_client"))
	}
	args, err := ParseArgs(`{"query":"select:lookup_order"}`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := findTools(context.Background(), &Call{Args: args, View: v})
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Tools []struct {
			Name        string `json:"name"`
			SchemaError string `json:"schema_error"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(res.Content), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Tools) != 1 || !strings.Contains(out.Tools[0].SchemaError, "minLength") {
		t.Errorf("find_tools = %s; want the schema error", res.Content)
	}
	if len(res.Fetched) != 0 {
		t.Errorf("fetched %v; a tool that cannot be called is not fetched", res.Fetched)
	}
}

// TestClientToolShadowsBuiltin: a client tool may take the name of a
// registered tool the provider's array does not carry (the client's wins);
// where both would be in the array, the view is refused with a message.
func TestClientToolShadowsBuiltin(t *testing.T) {
	reg := NewRegistry()
	RegisterMeta(reg)
	reg.Register(Tool{Name: "calculate", Description: "Built-in.", Handler: func(context.Context, *Call) (Result, error) { return Result{}, nil }})
	client := func() []*Tool { return []*Tool{ClientToolFromSpec("calculate", "The client's.", `{"type":"object"}`)} }

	v, err := NewView(reg, "openai", client(), nil)
	if err != nil {
		t.Fatalf("openai: NewView: %v", err)
	}
	tool, ok := v.Lookup("calculate")
	if !ok || tool.Source != SourceClient || !v.IsClient("calculate") {
		t.Errorf("Lookup = %+v; want the client's tool", tool)
	}
	n := 0
	for _, tl := range v.Tools() {
		if tl.Name == "calculate" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("Tools lists calculate %d times", n)
	}

	_, err = NewView(reg, ProviderClaudeCode, client(), nil)
	if err == nil || !strings.Contains(err.Error(), `client tool "calculate" has the name of a built-in tool in the tools array`) {
		t.Errorf("claude-code: NewView = %v; want a collision error", err)
	}
	if !errors.Is(err, ErrToolCollision) {
		t.Errorf("error %v is not ErrToolCollision", err)
	}
	if _, err := NewView(reg, ProviderClaudeCode, client(), []string{"calculate"}); err != nil {
		t.Errorf("claude-code with calculate excluded: %v", err)
	}
	if _, err := NewView(reg, "openai", []*Tool{ClientToolFromSpec("find_tools", "", "")}, nil); err == nil {
		t.Error("a client find_tools was accepted under openai, where the built-in is in the array")
	}
}

func TestArrayPolicies(t *testing.T) {
	reg := NewRegistry()
	RegisterMeta(reg)
	h := func(context.Context, *Call) (Result, error) { return Result{}, nil }
	reg.Register(Tool{Name: "hidden", Description: "Not in the lazy array.", Handler: h})
	reg.Register(Tool{Name: "pinned", Description: "Always in the array.", Handler: h, AlwaysInArray: true})
	for _, tc := range []struct {
		provider, policy string
		array            []string
		fetched          []string // of find_tools, hidden, pinned
	}{
		{"", ArrayLazy, []string{"find_tools", "pinned", "run_tool"}, []string{"find_tools", "pinned"}},
		{"openai", ArrayLazy, []string{"find_tools", "pinned", "run_tool"}, []string{"find_tools", "pinned"}},
		{"lazy", ArrayLazy, []string{"find_tools", "pinned", "run_tool"}, []string{"find_tools", "pinned"}},
		{"gemini", ArrayLazy, []string{"find_tools", "pinned", "run_tool"}, []string{"find_tools", "pinned"}},
		{"all", ArrayAll, []string{"find_tools", "hidden", "pinned"}, []string{"find_tools"}},
		{"claude-code", ArrayAll, []string{"find_tools", "hidden", "pinned"}, []string{"find_tools"}},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			v, err := NewView(reg, tc.provider, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if v.Policy() != tc.policy {
				t.Errorf("policy %q, want %q", v.Policy(), tc.policy)
			}
			var names []string
			for _, f := range v.Array() {
				names = append(names, f.Function.Name)
			}
			if diff := cmp.Diff(tc.array, names); diff != "" {
				t.Errorf("array (-want +got):\n%s", diff)
			}
			var fetched []string
			for _, n := range []string{"find_tools", "hidden", "pinned"} {
				if v.StartsFetched(n) {
					fetched = append(fetched, n)
				}
			}
			if diff := cmp.Diff(tc.fetched, fetched); diff != "" {
				t.Errorf("starts fetched (-want +got):\n%s", diff)
			}
			if tc.policy == ArrayLazy && strings.Contains(v.ContextText(), "- pinned:") {
				t.Error("a pinned tool is also listed as reachable through run_tool")
			}
		})
	}
}
