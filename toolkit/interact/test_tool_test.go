package interact

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// scriptFixture registers fake script and ext tools with examples, and
// test_tool over them. ran records the canonical arguments each handler got.
type scriptFixture struct {
	reg      *toolkit.Registry
	examples map[string]*Example
	mu       sync.Mutex
	ran      map[string]string // guarded by mu
}

const greetSchema = `{"type":"object","properties":{"name":{"type":"string"},"loud":{"type":"boolean"}},"required":["name"],"additionalProperties":false}`

func newScriptFixture(t *testing.T) *scriptFixture {
	t.Helper()
	f := &scriptFixture{reg: toolkit.NewRegistry(), examples: map[string]*Example{}, ran: map[string]string{}}
	add := func(name string, src toolkit.Source, example string, timeout time.Duration, h func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error)) {
		f.reg.Register(toolkit.Tool{
			Name: name, Description: name, Schema: json.RawMessage(greetSchema), Source: src, Timeout: timeout,
			Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
				f.mu.Lock()
				f.ran[c.Name] = string(c.Args.Canonical)
				f.mu.Unlock()
				return h(ctx, c)
			},
		})
		if example != "" {
			f.examples[name] = &Example{Arguments: json.RawMessage(example)}
		}
	}
	greet := func(_ context.Context, c *toolkit.Call) (toolkit.Result, error) {
		return toolkit.Result{Content: "hello " + c.Args.String("name")}, nil
	}
	add("script_greet", toolkit.SourceScript, `{ "name": "Ada",  "loud": false }`, 0, greet)
	add("ext_greet", toolkit.SourceExt, `{"name":"Bob"}`, 0, greet)
	add("script_badexample", toolkit.SourceScript, `{"name":42}`, 0, greet)
	add("script_dupkeys", toolkit.SourceScript, `{"name":"a","name":"b"}`, 0, greet)
	add("script_noexample", toolkit.SourceScript, "", 0, greet)
	add("script_fails", toolkit.SourceScript, `{"name":"x"}`, 0, func(context.Context, *toolkit.Call) (toolkit.Result, error) {
		return toolkit.Result{}, errors.New("exit status 2: jq: command not found")
	})
	add("script_panics", toolkit.SourceScript, `{"name":"x"}`, 0, func(context.Context, *toolkit.Call) (toolkit.Result, error) {
		panic("index out of range")
	})
	add("script_skips", toolkit.SourceScript, `{"name":"x"}`, 0, func(context.Context, *toolkit.Call) (toolkit.Result, error) {
		return toolkit.Result{}, toolkit.Skipped("nobody approved")
	})
	add("script_hangs", toolkit.SourceScript, `{"name":"x"}`, 2*time.Second, func(ctx context.Context, _ *toolkit.Call) (toolkit.Result, error) {
		<-ctx.Done()
		return toolkit.Result{}, ctx.Err()
	})
	add("builtin_greet", toolkit.SourceBuiltin, `{"name":"x"}`, 0, greet)
	f.examples["script_other"] = &Example{Tool: "script_greet", Arguments: json.RawMessage(`{"name":"x"}`)}
	add("script_other", toolkit.SourceScript, "", 0, greet)

	f.reg.Register(TestTool(f.reg, func(name string) (*toolkit.Tool, *Example, bool) {
		tool, ok := f.reg.Lookup(name)
		return tool, f.examples[name], ok
	}))
	return f
}

func TestTestTool(t *testing.T) {
	tests := []struct {
		name    string
		tool    string
		want    []string // parts of the answer (PASS) or error (FAIL and refusals)
		wantErr bool
		ran     string // canonical arguments the tool ran with; "" when it must not run
	}{
		{
			name: "pass with canonical arguments",
			tool: "script_greet",
			want: []string{"PASS: script_greet: its example ran in", `example arguments: {"loud":false,"name":"Ada"}`, "output:\nhello Ada\n"},
			ran:  `{"loud":false,"name":"Ada"}`,
		},
		{name: "ext tool", tool: "ext_greet", want: []string{"PASS: ext_greet", "hello Bob"}, ran: `{"name":"Bob"}`},
		{
			name:    "example does not match the schema",
			tool:    "script_badexample",
			want:    []string{"FAIL: script_badexample: its example does not match its schema", `field "name": want string`},
			wantErr: true,
		},
		{name: "example does not parse", tool: "script_dupkeys", want: []string{"FAIL: script_dupkeys: its example arguments do not parse", "duplicate key"}, wantErr: true},
		{name: "tool fails", tool: "script_fails", want: []string{"FAIL: script_fails: its example failed after", "jq: command not found", `example arguments: {"name":"x"}`}, wantErr: true, ran: `{"name":"x"}`},
		{name: "tool panics", tool: "script_panics", want: []string{"FAIL: script_panics", "the tool panicked: index out of range"}, wantErr: true, ran: `{"name":"x"}`},
		{name: "no example", tool: "script_noexample", want: []string{"script_noexample has no example call"}, wantErr: true},
		{name: "example of another tool", tool: "script_other", want: []string{"FAIL: script_other: its example calls script_greet"}, wantErr: true},
		{name: "builtin tool", tool: "builtin_greet", want: []string{"builtin_greet is a builtin tool; test_tool tests script and ext tools only"}, wantErr: true},
		{name: "unknown tool", tool: "script_gret", want: []string{`no tool named "script_gret"; did you mean script_greet`}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newScriptFixture(t)
			out, err := callTool(t, f.reg, context.Background(), "test_tool", `{"name":"`+tt.tool+`"}`, nil)
			got := out
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got %q, want an error", out)
				}
				got = err.Error()
			} else if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("answer lacks %q:\n%s", w, got)
				}
			}
			f.mu.Lock()
			ran := f.ran[tt.tool]
			f.mu.Unlock()
			if ran != tt.ran {
				t.Errorf("the tool ran with %q, want %q", ran, tt.ran)
			}
		})
	}
}

func TestTestToolSkippedAndTimeout(t *testing.T) {
	f := newScriptFixture(t)
	_, err := callTool(t, f.reg, context.Background(), "test_tool", `{"name":"script_skips"}`, nil)
	var sk *toolkit.SkippedError
	if !errors.As(err, &sk) || !strings.Contains(sk.Reason, "nobody approved") {
		t.Errorf("a skipped example: %v", err)
	}
	synctest.Test(t, func(t *testing.T) {
		f := newScriptFixture(t)
		start := time.Now()
		_, err := callTool(t, f.reg, context.Background(), "test_tool", `{"name":"script_hangs"}`, nil)
		if err == nil || !strings.Contains(err.Error(), "FAIL: script_hangs: its example timed out after 2s") {
			t.Errorf("a hanging example: %v", err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("waited %s, want the tool's own 2s timeout", d)
		}
	})
}

func TestTestToolNeedsRegistryAndLookup(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("TestTool without a lookup did not panic")
		}
	}()
	TestTool(toolkit.NewRegistry(), nil)
}

func TestInteractFlags(t *testing.T) {
	e := newEnv(t)
	e.reg.Register(TestTool(e.reg, func(string) (*toolkit.Tool, *Example, bool) { return nil, nil, false }))
	none := mustArgs(t, `{}`)
	withPath := mustArgs(t, `{"path":"a.md"}`)
	tests := []struct {
		name                  string
		concurrent            bool
		readOnly, readOnlyArg bool // without and with a path argument
		minTimeout            time.Duration
	}{
		{"ask_user", false, true, true, maxAskWait},
		{"write_result", false, true, false, time.Second},
		{"html_template", true, false, false, time.Second},
		{"test_tool", true, false, false, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, ok := e.reg.Lookup(tt.name)
			if !ok {
				t.Fatalf("%s not registered", tt.name)
			}
			if tool.Concurrent != tt.concurrent || tool.IsReadOnly(none) != tt.readOnly || tool.IsReadOnly(withPath) != tt.readOnlyArg {
				t.Errorf("concurrent %v, read-only %v/%v; want %v, %v/%v", tool.Concurrent, tool.IsReadOnly(none), tool.IsReadOnly(withPath), tt.concurrent, tt.readOnly, tt.readOnlyArg)
			}
			if tool.Timeout < tt.minTimeout {
				t.Errorf("timeout %s, want at least %s", tool.Timeout, tt.minTimeout)
			}
		})
	}
}

// TestTestToolHonoursTheRunsExclude: a tool the run excludes cannot be run
// through test_tool either; its example never runs.
func TestTestToolHonoursTheRunsExclude(t *testing.T) {
	f := newScriptFixture(t)
	view, err := toolkit.NewView(f.reg, "openai", nil, []string{"script_greet"})
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := f.reg.Lookup("test_tool")
	_, err = tool.Handler(context.Background(), &toolkit.Call{Session: "s1", Run: "r1", ID: "c1", Name: "test_tool",
		Args: mustArgs(t, `{"name":"script_greet"}`), Emit: func(string) {}, View: view})
	if err == nil || !strings.Contains(err.Error(), `no tool named "script_greet"`) {
		t.Fatalf("err = %v, want the excluded tool not found", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ran := f.ran["script_greet"]; ran {
		t.Fatal("the excluded tool's example ran")
	}
}
