package interact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"path"
	"strings"
	"text/template/parse"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Bounds of html_template.
const (
	htmlTemplateTimeout = 30 * time.Second
	// maxTemplateBytes bounds the template text, given or read.
	maxTemplateBytes = 256 << 10
	// maxOutputBytes bounds the rendered output.
	maxOutputBytes = 4 << 20
	// maxTemplateSteps bounds the range iterations and template
	// invocations of one rendering, so that a loop that prints nothing still
	// ends.
	maxTemplateSteps = 1_000_000
	// stepFunc is the function instrumentation calls once per step.
	stepFunc = "__step"
)

// renderLimits bound one rendering.
type renderLimits struct {
	steps  int // range iterations and template invocations
	output int // bytes
}

var defaultRenderLimits = renderLimits{steps: maxTemplateSteps, output: maxOutputBytes}

func htmlTemplateTool(files *wsFiles) toolkit.Tool {
	return toolkit.Tool{
		Name: "html_template",
		Description: "Render a Go html/template with JSON data and write the result to a workspace file (e.g. a report " +
			"page). Values are escaped for their context (HTML, attributes, URLs, JavaScript, CSS), so data cannot inject " +
			"markup. Give the template inline (template) or as a workspace file (template_path); in the template, data " +
			"fields are .name, loops are {{range .items}}…{{end}}, conditions {{if .x}}…{{end}}. The output file is " +
			"created or replaced.",
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"template": {
					"type": "string",
					"description": "The template text (Go html/template syntax). Give this or template_path.",
					"minLength": 1,
					"maxLength": 262144
				},
				"template_path": {
					"type": "string",
					"description": "A workspace file holding the template text. Give this or template.",
					"minLength": 1
				},
				"data": {
					"type": "object",
					"description": "The data the template renders, as a JSON object; its fields are .field in the template."
				},
				"output_path": {
					"type": "string",
					"description": "The workspace file to write the rendered HTML to (e.g. reports/index.html).",
					"minLength": 1
				}
			},
			"required": ["output_path"],
			"oneOf": [
				{"required": ["template"]},
				{"required": ["template_path"]}
			],
			"additionalProperties": false
		}`),
		Concurrent: true,
		ReadOnly:   false,
		Timeout:    htmlTemplateTimeout,
		Handler:    files.htmlTemplate,
		Paths:      func(a toolkit.Args) []string { return files.paths(a.String("output_path")) },
		// A repeat must render again once the template file or anything
		// else may have changed.
		StaleOnMutation: true,
		// The approval is bound to the output and template files as the
		// preview read them.
		Preview:   files.htmlTemplatePreview,
		FileState: files.htmlTemplateState,
	}
}

func (f *wsFiles) htmlTemplate(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	text, tplPath := c.Args.String("template"), c.Args.String("template_path")
	switch {
	case text != "" && tplPath != "":
		return toolkit.Result{}, errors.New("give either template or template_path, not both")
	case text == "" && tplPath == "":
		return toolkit.Result{}, errors.New("give the template text (template) or a workspace file holding it (template_path)")
	case len(text) > maxTemplateBytes:
		return toolkit.Result{}, fmt.Errorf("the template is %d bytes; at most %d", len(text), maxTemplateBytes)
	}
	out, err := f.clean(c.Args.String("output_path"))
	if err != nil {
		return toolkit.Result{}, err
	}
	name, source := "template", "the template"
	if tplPath != "" {
		data, rel, err := f.read(tplPath, maxTemplateBytes)
		if err != nil {
			return toolkit.Result{}, err
		}
		text, name, source = string(data), path.Base(rel), rel
	}
	var data any = map[string]any{}
	if d, ok := c.Args.Value["data"]; ok && d != nil {
		data = plainNumbers(d)
	}
	html, err := render(ctx, name, text, data, defaultRenderLimits)
	if err != nil {
		return toolkit.Result{}, err
	}
	version, err := f.write(ctx, out, html, "html_template")
	if err != nil {
		return toolkit.Result{}, err
	}
	msg := fmt.Sprintf("Rendered %s to %s (%s).", source, out, toolkit.HumanSize(len(html)))
	if version > 0 {
		msg += fmt.Sprintf(" The file's previous state is kept as version %d (restore_file undoes the write).", version)
	}
	return toolkit.Result{Content: msg}, nil
}

// render parses and executes an html/template over data. Execution checks
// ctx and counts steps (every range iteration and template invocation), and
// its output is capped, so a template that loops or grows without end fails
// instead of running on. The template gets the standard functions only.
func render(ctx context.Context, name, text string, data any, lim renderLimits) ([]byte, error) {
	tooManySteps := fmt.Errorf("the template ran more than %d loop iterations and template calls; it probably loops without end", lim.steps)
	tooBig := fmt.Errorf("the output is larger than %s; render less data or split it into several files", toolkit.HumanSize(lim.output))
	steps := 0
	step := func() (string, error) {
		steps++
		if steps > lim.steps {
			return "", tooManySteps
		}
		return "", ctx.Err()
	}
	t, err := template.New(name).Funcs(template.FuncMap{stepFunc: step}).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("the template does not parse: %w", err)
	}
	if err := instrument(t); err != nil {
		return nil, err
	}
	w := &cappedWriter{ctx: ctx, limit: lim.output, tooBig: tooBig}
	if err := t.Execute(w, data); err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, tooManySteps):
			return nil, tooManySteps
		case errors.Is(err, tooBig):
			return nil, tooBig
		}
		return nil, fmt.Errorf("rendering the template: %w", err)
	}
	return w.buf.Bytes(), nil
}

// instrument puts a step action at the start of every template body and
// every range body of t's templates. The action declares a variable, so it
// prints nothing and the escaper leaves it alone.
func instrument(t *template.Template) error {
	trees, err := parse.Parse("step", "{{$"+stepFunc+" := "+stepFunc+"}}", "", "", map[string]any{stepFunc: func() string { return "" }})
	if err != nil {
		return fmt.Errorf("building the step action: %w", err)
	}
	stepNode := trees["step"].Root.Nodes[0]
	var walk func(n parse.Node)
	prepend := func(l *parse.ListNode) {
		if l != nil {
			l.Nodes = append([]parse.Node{stepNode.Copy()}, l.Nodes...)
		}
	}
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n == nil {
				return
			}
			for _, c := range n.Nodes {
				walk(c)
			}
		case *parse.IfNode:
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			walk(n.List)
			walk(n.ElseList)
			prepend(n.List)
		}
	}
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Tree.Root == nil {
			continue
		}
		walk(tt.Tree.Root)
		prepend(tt.Tree.Root)
	}
	return nil
}

// cappedWriter collects output up to limit bytes and stops a rendering
// whose context ended.
type cappedWriter struct {
	ctx    context.Context
	buf    bytes.Buffer
	limit  int
	tooBig error
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	if w.buf.Len()+len(p) > w.limit {
		return 0, w.tooBig
	}
	return w.buf.Write(p)
}

// plainNumbers turns the json.Number values of parsed arguments into int64
// (integers that fit) or float64, so templates can compare them ({{if gt
// .count 0}}) and print them as written.
func plainNumbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = plainNumbers(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = plainNumbers(e)
		}
		return out
	case json.Number:
		if !strings.ContainsAny(string(v), ".eE") {
			if i, err := v.Int64(); err == nil {
				return i
			}
		}
		if f, err := v.Float64(); err == nil {
			return f
		}
		return string(v)
	}
	return v
}
