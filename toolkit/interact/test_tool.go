package interact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Bounds of test_tool.
const (
	// testToolTimeout bounds the whole test; the example call also runs
	// under its own tool's timeout.
	testToolTimeout = 10 * time.Minute
	// maxTestOutput caps the tool output a report shows.
	maxTestOutput = 16 << 10
)

// Example is the example call a script or ext tool's definition carries:
// the tool it calls and its arguments (a JSON object).
type Example struct {
	// Tool names the tool the example calls; empty means the tool it
	// belongs to.
	Tool      string
	Arguments json.RawMessage
}

// TestTool returns test_tool, which runs a script or ext tool's example
// call and reports whether it passed. lookup returns a tool by name with its
// example (nil when its definition has none); reg supplies the schema cache
// the example is validated with and the names suggested for a typo. Both are
// required: TestTool panics without them (a start-up mistake).
func TestTool(reg *toolkit.Registry, lookup func(name string) (*toolkit.Tool, *Example, bool)) toolkit.Tool {
	if reg == nil || lookup == nil {
		panic("interact: TestTool needs a registry and a lookup function")
	}
	tt := &tester{reg: reg, lookup: lookup}
	return toolkit.Tool{
		Name: "test_tool",
		Description: "Test a script or extension tool (script_*, ext_*) by running the example call its definition " +
			"carries: the example is checked against the tool's schema, then run, and the report says PASS or FAIL " +
			"with the tool's output. The example runs for real and may change things, as the tool itself would.",
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"name": {
					"type": "string",
					"description": "Name of the script or ext tool to test (e.g. script_deploy).",
					"minLength": 1,
					"maxLength": 64
				}
			},
			"required": ["name"],
			"additionalProperties": false
		}`),
		Concurrent: true,
		// The example may do anything the script does.
		ReadOnly: false,
		Timeout:  testToolTimeout,
		Handler:  tt.run,
		// A test asked for again runs again.
		NoDedup: true,
	}
}

// tester runs example calls. Immutable after TestTool; safe for
// concurrent use.
type tester struct {
	reg    *toolkit.Registry
	lookup func(name string) (*toolkit.Tool, *Example, bool)
}

func (tt *tester) run(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	name := strings.TrimSpace(c.Args.String("name"))
	tool, ex, ok := tt.lookup(name)
	if ok && c.View != nil {
		// The run's view is where its excludes (the operator's and the
		// turn's own) are enforced: a tool it hides is not run here either.
		_, ok = c.View.Lookup(name)
	}
	if !ok || tool == nil {
		msg := fmt.Sprintf("no tool named %q", name)
		var names []string
		for _, t := range tt.reg.All() {
			if t.Source == toolkit.SourceScript || t.Source == toolkit.SourceExt {
				names = append(names, t.Name)
			}
		}
		if near := toolkit.Closest(name, names, 3); len(near) > 0 {
			msg += "; did you mean " + strings.Join(near, ", ") + "?"
		}
		return toolkit.Result{}, errors.New(msg)
	}
	switch {
	case tool.Source != toolkit.SourceScript && tool.Source != toolkit.SourceExt:
		return toolkit.Result{}, fmt.Errorf("%s is a %s tool; test_tool tests script and ext tools only", tool.Name, sourceName(tool.Source))
	case ex == nil:
		return toolkit.Result{}, fmt.Errorf("%s has no example call in its definition; add one to test it", tool.Name)
	case ex.Tool != "" && ex.Tool != tool.Name:
		return toolkit.Result{}, fail(tool.Name, "", "its example calls %s, not %s", ex.Tool, tool.Name)
	case tool.Handler == nil:
		return toolkit.Result{}, fmt.Errorf("%s has no handler to run", tool.Name)
	}

	raw := strings.TrimSpace(string(ex.Arguments))
	args, err := toolkit.ParseArgs(raw, toolkit.DefaultLimits)
	if err != nil {
		return toolkit.Result{}, fail(tool.Name, raw, "its example arguments do not parse: %v", err)
	}
	sch, err := tt.reg.Schemas.Compile(tool.Schema)
	if err != nil {
		return toolkit.Result{}, fail(tool.Name, string(args.Canonical), "its schema does not compile: %v", err)
	}
	if err := sch.Validate(args.Value); err != nil {
		return toolkit.Result{}, fail(tool.Name, string(args.Canonical), "its example does not match its schema: %v", err)
	}

	timeout := tool.EffectiveTimeout()
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	call := &toolkit.Call{
		Session: c.Session, Run: c.Run, Turn: c.Turn, ID: c.ID, Name: tool.Name, Args: args,
		Emit: c.Emit, View: c.View, Ask: c.Ask,
	}
	start := time.Now()
	res, err := safeRun(runCtx, tool, call)
	took := time.Since(start).Round(time.Millisecond)
	var skipped *toolkit.SkippedError
	switch {
	case err == nil:
		return toolkit.Result{Content: report("PASS", tool.Name, fmt.Sprintf("its example ran in %s", took), string(args.Canonical), res.Content)}, nil
	case ctx.Err() != nil:
		return toolkit.Result{}, ctx.Err()
	case errors.As(err, &skipped):
		return toolkit.Result{}, toolkit.Skipped("%s's example call was skipped: %s", tool.Name, skipped.Reason)
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return toolkit.Result{}, fail(tool.Name, string(args.Canonical), "its example timed out after %s (the tool's timeout): %v", timeout, err)
	}
	return toolkit.Result{}, fail(tool.Name, string(args.Canonical), "its example failed after %s: %v", took, err)
}

// safeRun runs the tool's handler, turning a panic into an error.
func safeRun(ctx context.Context, t *toolkit.Tool, c *toolkit.Call) (res toolkit.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the tool panicked: %v", r)
		}
	}()
	return t.Handler(ctx, c)
}

// fail is the error of a failed test: the report, FAIL first.
func fail(tool, args, format string, a ...any) error {
	return errors.New(report("FAIL", tool, fmt.Sprintf(format, a...), args, ""))
}

// report is the text of a test's outcome.
func report(verdict, tool, what, args, output string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s: %s.\n", verdict, tool, strings.TrimSuffix(what, "."))
	if args != "" {
		fmt.Fprintf(&b, "example arguments: %s\n", args)
	}
	if verdict == "PASS" {
		if output == "" {
			b.WriteString("output: (empty)\n")
		} else {
			b.WriteString("output:\n")
			b.WriteString(clipOutput(output))
			if !strings.HasSuffix(output, "\n") {
				b.WriteByte('\n')
			}
		}
	}
	return b.String()
}

// clipOutput keeps the head of a long output and says how much was cut.
func clipOutput(s string) string {
	if len(s) <= maxTestOutput {
		return s
	}
	cut := maxTestOutput
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n… (%d more bytes not shown)", len(s)-cut)
}

func sourceName(s toolkit.Source) string {
	if s == "" {
		return string(toolkit.SourceBuiltin)
	}
	return string(s)
}
