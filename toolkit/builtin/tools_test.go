package builtin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// TestToolFlags checks each tool's flags against SPEC sections 3, 5 and 6.
func TestToolFlags(t *testing.T) {
	e := newTestEnv(t)
	tests := []struct {
		name       string
		concurrent bool
		readOnly   bool
		timeout    time.Duration
		paths      bool // declares the paths it reads or writes
		stale      bool // invalidated by any mutating call
	}{
		{name: "calculate", concurrent: true, readOnly: true, timeout: calculateTimeout},
		{name: "edit_file", timeout: editTimeout, paths: true},
		{name: "file_history", concurrent: true, readOnly: true, timeout: historyTimeout, paths: true},
		{name: "find_files", concurrent: true, readOnly: true, timeout: findTimeout, stale: true},
		{name: "read_files", concurrent: true, readOnly: true, timeout: readTimeout, paths: true},
		{name: "reasoning_guide", concurrent: true, readOnly: true, timeout: reasoningTimeout},
		{name: "remove_file", timeout: editTimeout, paths: true},
		{name: "restore_file", timeout: editTimeout, paths: true},
		{name: "run_command", timeout: 300 * time.Second, stale: true},
		{name: "write_todo", concurrent: true, readOnly: true, timeout: todoTimeout},
	}
	var names []string
	for _, tt := range tests {
		names = append(names, tt.name)
		t.Run(tt.name, func(t *testing.T) {
			tool, ok := e.tools[tt.name]
			if !ok {
				t.Fatalf("tool %s is not built", tt.name)
			}
			if tool.Concurrent != tt.concurrent {
				t.Errorf("Concurrent = %v, want %v", tool.Concurrent, tt.concurrent)
			}
			if tool.ReadOnlyFunc != nil || tool.ReadOnly != tt.readOnly {
				t.Errorf("read-only policy = %v, want %v", tool.ReadOnlyLabel(), tt.readOnly)
			}
			if tool.EffectiveTimeout() != tt.timeout {
				t.Errorf("timeout = %s, want %s", tool.EffectiveTimeout(), tt.timeout)
			}
			if (tool.Paths != nil) != tt.paths {
				t.Errorf("Paths set = %v, want %v", tool.Paths != nil, tt.paths)
			}
			if tool.StaleOnMutation != tt.stale {
				t.Errorf("StaleOnMutation = %v, want %v", tool.StaleOnMutation, tt.stale)
			}
			if tool.Description == "" || tool.Handler == nil {
				t.Errorf("description or handler missing")
			}
		})
	}
	var built []string
	for name := range e.tools {
		built = append(built, name)
	}
	slices.Sort(built)
	if diff := cmp.Diff(names, built); diff != "" {
		t.Fatalf("built tools (-want +got):\n%s", diff)
	}
}

func TestToolPaths(t *testing.T) {
	e := newTestEnv(t)
	tests := []struct {
		tool, args string
		want       []string
	}{
		{"read_files", fmt.Sprintf(`{"paths":["./a/../b.txt",%q,"../x","/etc/passwd","c/d.go"]}`, e.path("b.txt")), []string{"b.txt", "c/d.go"}},
		{"edit_file", `{"path":"src//x.go","content":""}`, []string{"src/x.go"}},
		{"remove_file", fmt.Sprintf(`{"path":%q}`, e.path("src/x.go")), []string{"src/x.go"}},
		{"restore_file", `{"path":"./src/x.go"}`, []string{"src/x.go"}},
		{"file_history", `{"path":"src/x.go"}`, []string{"src/x.go"}},
		{"edit_file", `{"path":"../out.go","content":""}`, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.args, func(t *testing.T) {
			got := e.tools[tt.tool].Paths(mustArgs(t, tt.args))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("Paths (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSchemas compiles every schema with a real JSON Schema 2020-12
// validator, checks the house rules (object at the top, no additional
// properties, a description on every property, required names declared)
// and validates good and bad arguments.
func TestSchemas(t *testing.T) {
	e := newTestEnv(t)
	reg := toolkit.NewRegistry()
	Register(reg, Deps{Workspace: e.ws})
	samples := map[string]struct{ good, bad []string }{
		"calculate":       {good: []string{`{"expression":"1+1"}`}, bad: []string{`{}`, `{"expression":""}`, `{"expression":1}`, `{"expression":"1","x":1}`}},
		"edit_file":       {good: []string{`{"path":"a","content":""}`, `{"path":"a","old_string":"x","new_string":"","replace_all":true}`}, bad: []string{`{"content":"x"}`, `{"path":"a","old_string":""}`, `{"path":"a","replace_all":"yes"}`}},
		"file_history":    {good: []string{`{"path":"a"}`}, bad: []string{`{}`, `{"path":""}`}},
		"find_files":      {good: []string{`{"pattern":"*.go"}`, `{"pattern":"*","path":"src","max_results":5}`}, bad: []string{`{"path":"src"}`, `{"pattern":"*","max_results":0}`, `{"pattern":"*","max_results":1001}`}},
		"read_files":      {good: []string{`{"paths":["a"]}`, `{"paths":["a","b"],"offset":3,"limit":10}`}, bad: []string{`{"paths":[]}`, `{"paths":"a"}`, `{"paths":["a"],"offset":0}`, `{"paths":[` + strings.Repeat(`"a",`, 50) + `"a"]}`}},
		"reasoning_guide": {good: []string{`{}`, `{"topic":"editing"}`, `{"topic":"all"}`}, bad: []string{`{"topic":"cooking"}`}},
		"remove_file":     {good: []string{`{"path":"a"}`}, bad: []string{`{}`, `{"path":"a","force":true}`}},
		"restore_file":    {good: []string{`{"path":"a"}`, `{"path":"a","version":2}`}, bad: []string{`{"path":"a","version":0}`, `{"path":"a","version":1.5}`}},
		"run_command":     {good: []string{`{"argv":["ls"]}`, `{"shell":"ls | wc","cwd":"src","timeout_ms":1000,"stdin":""}`}, bad: []string{`{"argv":[]}`, `{"argv":"ls"}`, `{"argv":["ls"],"timeout_ms":300001}`, `{"argv":["ls"],"env":{}}`}},
		"write_todo":      {good: []string{`{"todos":[]}`, `{"todos":[{"content":"a","status":"pending","id":"1"},{"content":"b","status":"completed"}]}`}, bad: []string{`{}`, `{"todos":[{"content":"a","status":"done"}]}`, `{"todos":[{"content":"a"}]}`, `{"todos":[{"content":"a","status":"pending","extra":1}]}`}},
	}
	for name, tool := range e.tools {
		t.Run(name, func(t *testing.T) {
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(tool.Schema))
			if err != nil {
				t.Fatalf("schema is not JSON: %v", err)
			}
			c := jsonschema.NewCompiler()
			c.DefaultDraft(jsonschema.Draft2020)
			url := "mem:///" + name + ".json"
			if err := c.AddResource(url, doc); err != nil {
				t.Fatal(err)
			}
			sch, err := c.Compile(url)
			if err != nil {
				t.Fatalf("schema does not compile: %v", err)
			}

			var raw map[string]any
			must(t, json.Unmarshal(tool.Schema, &raw))
			checkObjectSchema(t, name, raw)

			// The registry's own compiled schema, as the dispatcher uses it.
			regSchema, err := reg.Schemas.Compile(tool.Schema)
			if err != nil {
				t.Fatalf("the registry does not compile the schema: %v", err)
			}

			s, ok := samples[name]
			if !ok {
				t.Fatalf("no sample arguments for %s", name)
			}
			for _, g := range s.good {
				inst, err := jsonschema.UnmarshalJSON(strings.NewReader(g))
				must(t, err)
				if err := sch.Validate(inst); err != nil {
					t.Errorf("valid arguments %s rejected: %v", g, err)
				}
				if err := regSchema.Validate(mustArgs(t, g).Value); err != nil {
					t.Errorf("valid arguments %s rejected by the registry: %v", g, err)
				}
			}
			for _, b := range s.bad {
				inst, err := jsonschema.UnmarshalJSON(strings.NewReader(b))
				must(t, err)
				if err := sch.Validate(inst); err == nil {
					t.Errorf("invalid arguments %s accepted", b)
				}
				if err := regSchema.Validate(mustArgs(t, b).Value); err == nil {
					t.Errorf("invalid arguments %s accepted by the registry", b)
				}
			}
		})
	}
}

// checkObjectSchema applies the house rules to an object schema and,
// recursively, to the object schemas of its properties and items.
func checkObjectSchema(t *testing.T, where string, s map[string]any) {
	t.Helper()
	if s["type"] != "object" {
		t.Errorf("%s: type = %v, want object", where, s["type"])
	}
	if s["additionalProperties"] != false {
		t.Errorf("%s: additionalProperties must be false", where)
	}
	props, _ := s["properties"].(map[string]any)
	if len(props) == 0 {
		t.Errorf("%s: no properties", where)
	}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if _, ok := props[r.(string)]; !ok {
				t.Errorf("%s: required %v is not a property", where, r)
			}
		}
	}
	for name, p := range props {
		ps := p.(map[string]any)
		if d, _ := ps["description"].(string); d == "" {
			t.Errorf("%s.%s: no description", where, name)
		}
		if ps["type"] == "object" {
			checkObjectSchema(t, where+"."+name, ps)
		}
		if items, ok := ps["items"].(map[string]any); ok {
			if d, _ := items["description"].(string); d == "" {
				t.Errorf("%s.%s[]: no description", where, name)
			}
			if items["type"] == "object" {
				checkObjectSchema(t, where+"."+name+"[]", items)
			}
		}
	}
}

func TestRegister(t *testing.T) {
	e := newTestEnv(t)
	reg := toolkit.NewRegistry()
	Register(reg, Deps{Workspace: e.ws})
	var names []string
	for _, tool := range reg.All() {
		names = append(names, tool.Name)
		if tool.Source != toolkit.SourceBuiltin {
			t.Errorf("%s: source %q, want builtin", tool.Name, tool.Source)
		}
	}
	want := []string{"calculate", "edit_file", "file_history", "find_files", "read_files", "reasoning_guide",
		"remove_file", "restore_file", "run_command", "write_todo"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("registered (-want +got):\n%s", diff)
	}

	bare := toolkit.NewRegistry()
	Register(bare, Deps{})
	names = names[:0]
	for _, tool := range bare.All() {
		names = append(names, tool.Name)
	}
	if diff := cmp.Diff([]string{"calculate", "reasoning_guide", "write_todo"}, names); diff != "" {
		t.Fatalf("registered without a workspace (-want +got):\n%s", diff)
	}
}

func TestDepsValidate(t *testing.T) {
	tests := []struct {
		name string
		deps Deps
		err  string
	}{
		{name: "zero", deps: Deps{}},
		{name: "cap", deps: Deps{OutputCap: 4096}},
		{name: "negative cap", deps: Deps{OutputCap: -1}, err: "Deps.OutputCap"},
		{name: "tiny cap", deps: Deps{OutputCap: 10}, err: "Deps.OutputCap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.deps.Validate()
			if tt.err == "" {
				must(t, err)
				return
			}
			wantErr(t, err, tt.err)
			defer func() {
				if recover() == nil {
					t.Fatal("Register accepted invalid deps")
				}
			}()
			Register(toolkit.NewRegistry(), tt.deps)
		})
	}
}
