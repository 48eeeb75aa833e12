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

const writeResultTimeout = 30 * time.Second

// Formats of write_result.
const (
	formatMarkdown = "markdown"
	formatText     = "text"
	formatJSON     = "json"
)

func writeResultTool(files *wsFiles) toolkit.Tool {
	desc := "Deliver the final result of your task: the answer, report or data the user asked for. Call it once, " +
		"when the work is done, with the whole result in content. Without path the result is recorded as this " +
		"run's final answer; with path it is also written to that workspace file (which may need approval)."
	if files.ws == nil {
		desc = "Deliver the final result of your task: the answer, report or data the user asked for. Call it once, " +
			"when the work is done, with the whole result in content; it is recorded as this run's final answer. " +
			"This host has no workspace, so path cannot be used."
	}
	t := toolkit.Tool{
		Name:        "write_result",
		Description: desc,
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"title": {
					"type": "string",
					"description": "A short title of the result.",
					"maxLength": 200
				},
				"content": {
					"type": "string",
					"description": "The whole result, in the given format.",
					"minLength": 1
				},
				"format": {
					"type": "string",
					"description": "markdown, text (plain) or json (content must then be one valid JSON value).",
					"enum": ["markdown", "text", "json"]
				},
				"path": {
					"type": "string",
					"description": "Optional workspace file to write the result to (e.g. reports/summary.md); created or replaced.",
					"minLength": 1
				}
			},
			"required": ["content", "format"],
			"additionalProperties": false
		}`),
		// Writing a file must not race other calls of the turn; it is the
		// last word of a run anyway.
		Concurrent: false,
		// Read-only unless it writes a file.
		ReadOnlyFunc: func(a toolkit.Args) bool { return a.String("path") == "" },
		Timeout:      writeResultTimeout,
		Handler:      files.writeResult,
		Paths:        func(a toolkit.Args) []string { return files.paths(a.String("path")) },
		// A repeat must write again once something else changed the file.
		StaleOnMutation: true,
	}
	if files.ws != nil {
		// The approval of a write is bound to the file as the preview
		// showed it.
		t.Preview, t.FileState = files.writeResultPreview, files.writeResultState
	}
	return t
}

func (f *wsFiles) writeResult(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	title := strings.TrimSpace(c.Args.String("title"))
	content := c.Args.String("content")
	format := c.Args.String("format")
	if strings.TrimSpace(content) == "" {
		return toolkit.Result{}, errors.New("content is empty: put the whole result in it")
	}
	switch format {
	case formatMarkdown, formatText:
	case formatJSON:
		if !json.Valid([]byte(content)) {
			return toolkit.Result{}, errors.New("format is json but content is not valid JSON; fix it or use format text")
		}
	default:
		return toolkit.Result{}, fmt.Errorf("format is %q; use markdown, text or json", format)
	}
	label := format
	if title != "" {
		label += ": " + title
	}
	p := c.Args.String("path")
	if p == "" {
		return toolkit.Result{Content: fmt.Sprintf("Final result recorded (%s).\n\n%s", label, content)}, nil
	}
	rel, err := f.clean(p)
	if err != nil {
		return toolkit.Result{}, err
	}
	version, err := f.write(ctx, rel, []byte(content), "write_result")
	if err != nil {
		return toolkit.Result{}, err
	}
	msg := fmt.Sprintf("Final result (%s) written to %s (%s).", label, rel, toolkit.HumanSize(len(content)))
	if version > 0 {
		msg += fmt.Sprintf(" The file's previous state is kept as version %d (restore_file undoes the write).", version)
	}
	return toolkit.Result{Content: msg}, nil
}
