package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

const findToolsSchema = `{
  "type": "object",
  "properties": {
    "query": {"type": "string", "description": "Keywords to search tool names and descriptions, or \"select:name1,name2\" to fetch exact tools. Ignored when mode is list."},
    "mode": {"type": "string", "enum": ["search", "list"], "description": "search (default): find tools by query; list: every available tool."},
    "max_results": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Most tools to return when searching (default 5)."}
  },
  "additionalProperties": false
}`

const runToolSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "description": "Name of the tool to call; fetch its schema with find_tools first."},
    "arguments": {"type": ["object", "string"], "description": "The tool's arguments: an object, or a JSON string holding one."}
  },
  "required": ["name"],
  "additionalProperties": false
}`

// RegisterMeta registers find_tools and run_tool.
func RegisterMeta(reg *Registry) {
	reg.Register(Tool{
		Name: FindToolsName,
		Description: "Find tools and fetch their full parameter schemas. Search by keywords, fetch exact tools with " +
			"query \"select:a,b\", or list every tool with mode \"list\". Fetched tools can then be called through run_tool.",
		Schema:     json.RawMessage(findToolsSchema),
		Concurrent: true,
		ReadOnly:   true,
		Handler:    findTools,
	})
	reg.Register(Tool{
		Name:        RunToolName,
		Description: "Call a tool that is not in your tools array, by name, with its arguments. Fetch its schema with find_tools first.",
		Schema:      json.RawMessage(runToolSchema),
		Concurrent:  true,
		ReadOnly:    true,
		Handler: func(context.Context, *Call) (Result, error) {
			return Result{}, errors.New("run_tool is unwrapped before execution; it cannot run by itself")
		},
	})
}

type foundTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	// SchemaError: the tool cannot be called, its schema does not compile.
	SchemaError string `json:"schema_error,omitempty"`
	// NotInFormat: why the schema cannot be given in the run's tools
	// format (Parameters is then the tool's own schema). The tool can
	// still be called through run_tool.
	NotInFormat string `json:"not_in_format,omitempty"`
	// OutputSchema is the schema of the tool's structured result, when it
	// declares one.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

func findTools(_ context.Context, c *Call) (Result, error) {
	if c.View == nil {
		return Result{}, errors.New("find_tools has no tool view")
	}
	query := strings.TrimSpace(c.Args.String("query"))
	mode := c.Args.String("mode")
	limit := int(c.Args.Int("max_results", 5))
	var picked []*Tool
	var missing []string
	switch {
	case mode == "list":
		for _, t := range c.View.Tools() {
			if t.Name != RunToolName {
				picked = append(picked, t)
			}
		}
	case strings.HasPrefix(query, "select:"):
		for _, n := range strings.Split(strings.TrimPrefix(query, "select:"), ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				continue
			}
			if t, ok := c.View.Lookup(n); ok {
				picked = append(picked, t)
			} else {
				missing = append(missing, n)
			}
		}
	default:
		if query == "" {
			return Result{}, errors.New("find_tools needs a query (keywords or \"select:name1,name2\"), or mode \"list\"")
		}
		picked = searchTools(c.View.Tools(), query, limit)
	}
	out := struct {
		Tools    []foundTool `json:"tools"`
		NotFound []string    `json:"not_found,omitempty"`
		Hint     string      `json:"hint,omitempty"`
	}{Tools: []foundTool{}}
	var fetched []string
	for _, t := range picked {
		params, why := c.View.FoundSchema(t)
		out.Tools = append(out.Tools, foundTool{Name: t.Name, Description: t.Description, Parameters: params,
			SchemaError: t.SchemaError, NotInFormat: why, OutputSchema: t.OutputSchema})
		if t.SchemaError == "" {
			fetched = append(fetched, t.Name)
		}
	}
	out.NotFound = missing
	if len(missing) > 0 {
		var all []string
		all = append(all, c.View.Names()...)
		var hints []string
		for _, m := range missing {
			if cl := Closest(m, all, 3); len(cl) > 0 {
				hints = append(hints, fmt.Sprintf("%s: did you mean %s?", m, strings.Join(cl, ", ")))
			}
		}
		out.Hint = strings.Join(hints, "; ")
	}
	if len(out.Tools) == 0 && len(missing) == 0 {
		out.Hint = "no tool matched; try other keywords or mode \"list\""
	}
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return Result{}, err
	}
	return Result{Content: strings.TrimSuffix(buf.String(), "\n"), Fetched: fetched}, nil
}

// searchTools scores tools by how many query words appear in their name
// (worth more) and description, best first, ties by name.
func searchTools(tools []*Tool, query string, limit int) []*Tool {
	words := strings.FieldsFunc(strings.ToLower(query), func(r rune) bool {
		return r == ' ' || r == ',' || r == '_' || r == '-' || r == '/' || r == '.'
	})
	type scored struct {
		t *Tool
		s int
	}
	var hits []scored
	for _, t := range tools {
		if t.Name == RunToolName {
			continue
		}
		name := strings.ToLower(t.Name)
		desc := strings.ToLower(t.Description)
		s := 0
		for _, w := range words {
			if name == w {
				s += 10
			} else if strings.Contains(name, w) {
				s += 5
			}
			if strings.Contains(desc, w) {
				s += 2
			}
		}
		if s > 0 {
			hits = append(hits, scored{t, s})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].s != hits[j].s {
			return hits[i].s > hits[j].s
		}
		return hits[i].t.Name < hits[j].t.Name
	})
	if limit <= 0 {
		limit = 5
	}
	var out []*Tool
	for i := 0; i < len(hits) && i < limit; i++ {
		out = append(out, hits[i].t)
	}
	return out
}
