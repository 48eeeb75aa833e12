package toolkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/integration_test/sdktypes"
)

// sharedTool is a tool of the shared test data with its expected calls.
type sharedTool struct {
	source, name string
	schema       json.RawMessage
	calls        []string // arguments as JSON text
}

// sharedTools reads the BFCL and τ-bench tools and their calls, in a
// stable order.
func sharedTools(t *testing.T) []*sharedTool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(sharedTestdata(t), "bfcl", "nonlive-sample-calls.json"))
	if err != nil {
		t.Fatal(err)
	}
	var bfcl []struct {
		ID          string          `json:"id"`
		Tool        string          `json:"tool"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Arguments   json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(raw, &bfcl); err != nil {
		t.Fatal(err)
	}
	// BFCL's two calls that break their own schemas (TestBFCLCallsValidate).
	broken := []string{"simple_python_96", "parallel_152"}
	var out []*sharedTool
	for _, c := range bfcl {
		st := &sharedTool{source: "bfcl " + c.ID, name: c.Tool, schema: c.InputSchema}
		if !slices.Contains(broken, c.ID) {
			st.calls = append(st.calls, argumentsText(t, c.Arguments))
		}
		out = append(out, st)
	}
	tau := loadTauBench(t)
	for _, domain := range []string{"retail", "airline"} {
		d := tau[domain]
		names := make([]string, 0, len(d.Tools))
		for n := range d.Tools {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			st := &sharedTool{source: "tau-bench " + domain, name: n, schema: d.Tools[n].Parameters}
			for _, c := range d.Calls {
				if c.Name == n {
					st.calls = append(st.calls, argumentsText(t, c.Arguments))
				}
			}
			out = append(out, st)
		}
	}
	return out
}

// withNulls is args with a null for every optional top-level property the
// call leaves out: what a model writes under a strict schema.
func withNulls(t *testing.T, schema json.RawMessage, args string) string {
	t.Helper()
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatal(err)
	}
	var a map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		t.Fatal(err)
	}
	for k := range s.Properties {
		if _, ok := a[k]; !ok && !slices.Contains(s.Required, k) {
			a[k] = json.RawMessage("null")
		}
	}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestProviderSchemasOfSharedData converts every BFCL and τ-bench schema
// for Gemini and OpenAI's strict formats: each converted schema holds no
// keyword outside the format's subset; in the strict formats every
// expected call, written as a strict model writes it (null for each
// optional property it leaves out), validates against the full original
// schema once the nulls are read as absent; and the converted tools
// arrays type-check against the providers' SDK types.
func TestProviderSchemasOfSharedData(t *testing.T) {
	tools := sharedTools(t)
	cache := NewSchemaCache()
	view, err := NewView(NewRegistry(), "openai", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range []ToolsFormat{ToolsGemini, ToolsOpenAIStrict, ToolsResponses} {
		converted := 0
		reasons := map[string]int{}
		var decls []string
		for i, st := range tools {
			params, err := ProviderSchema(st.schema, f)
			var r *SchemaRefusal
			if errors.As(err, &r) {
				reasons[r.Reason]++
				continue
			}
			if err != nil {
				t.Fatalf("%s %s: %v", st.source, st.name, err)
			}
			converted++
			for _, v := range SubsetViolations(f, params) {
				t.Errorf("%s: %s %s: %s", f, st.source, st.name, v)
			}
			decls = append(decls, declaration(f, i, st, params))
			if !f.Strict() {
				continue
			}
			sch, err := cache.Compile(st.schema)
			if err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			tool := &Tool{Name: st.name, Schema: st.schema}
			for _, call := range st.calls {
				a, err := ParseArgs(withNulls(t, st.schema, call), Limits{})
				if err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				if a, err = view.WithFormat(f).StrictArgs(tool, a, Limits{}); err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				if err := sch.Validate(a.Value); err != nil {
					t.Errorf("%s: %s %s: a strict call %s does not validate: %v", f, st.source, st.name, a.Canonical, err)
				}
			}
		}
		t.Logf("%s: %d of %d schemas converted, %d refused %v", f, converted, len(tools), len(tools)-converted, reasons)
		if converted == 0 {
			t.Errorf("%s: no schema converted", f)
		}
		files[string(f)+".ts"] = arrayFile(f, decls)
	}
	t.Run("SDK types", func(t *testing.T) {
		if _, err := sdktypes.Check(t, files); err != nil {
			t.Fatalf("the converted tools arrays do not type-check against the SDKs: %v", err)
		}
	})
}

// declaration is one tools-array entry of format f as TypeScript.
func declaration(f ToolsFormat, i int, st *sharedTool, params json.RawMessage) string {
	var v any
	if err := json.Unmarshal(params, &v); err != nil {
		return "/* " + err.Error() + " */"
	}
	switch f {
	case ToolsGemini:
		return sdktypes.GeminiLiteral(map[string]any{"name": st.name, "description": st.source, "parameters": v})
	case ToolsResponses:
		return sdktypes.Literal(map[string]any{"type": "function", "name": fmt.Sprintf("t%d", i), "description": st.source, "parameters": v, "strict": true})
	}
	return sdktypes.Literal(map[string]any{"type": "function", "function": map[string]any{"name": fmt.Sprintf("t%d", i), "description": st.source, "parameters": v, "strict": true}})
}

// arrayFile declares a tools array of format f holding decls.
func arrayFile(f ToolsFormat, decls []string) string {
	list := "[\n" + strings.Join(decls, ",\n") + "\n]"
	switch f {
	case ToolsGemini:
		return sdktypes.Declare("tools", sdktypes.GeminiToolsArray, `[{"functionDeclarations": `+list+`}]`)
	case ToolsResponses:
		return sdktypes.Declare("tools", sdktypes.ResponsesToolsArray, list)
	}
	return sdktypes.Declare("tools", sdktypes.ChatToolsArray, list)
}
