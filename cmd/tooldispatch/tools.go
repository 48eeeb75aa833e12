package main

import (
	"encoding/json"
	"os"
	"slices"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp"
)

// toolsOutput is what "tools" prints: the tools array in the --format's
// shape, the turn-context text and, in the formats that convert schemas,
// the tools left out of the array because theirs cannot be converted.
type toolsOutput struct {
	Tools   any                   `json:"tools"`
	Context string                `json:"context"`
	Refused []toolkit.RefusedTool `json:"refused,omitempty"`
}

// toolInfo is one tool as "tools --all" prints it.
type toolInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Concurrent  bool            `json:"concurrent"`
	ReadOnly    any             `json:"read_only"` // true, false or "depends on arguments"
	TimeoutMS   int64           `json:"timeout_ms"`
	Source      toolkit.Source  `json:"source"`
	// SchemaError: why the tool's schema does not compile (its calls fail).
	SchemaError string `json:"schema_error,omitempty"`
	// OutputSchema is the schema of the tool's structured result, when it
	// declares one (an MCP tool's outputSchema).
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// mcpServerInfo is one configured MCP server as "tools --all" prints it:
// a failed server's tools are absent from the list, and this says why.
type mcpServerInfo struct {
	Name  string    `json:"name"`
	State mcp.State `json:"state"`
	// Tools is how many of its tools are registered.
	Tools int `json:"tools"`
	// Error is the server's last failure.
	Error string `json:"error,omitempty"`
	// NextAttempt is when a failed or restarting server is tried again
	// (absent: not retried).
	NextAttempt *time.Time `json:"next_attempt,omitempty"`
	// Skipped are the tools it lists that are not registered.
	Skipped []skippedToolInfo `json:"skipped,omitempty"`
	// Protocol is the MCP revision its session speaks.
	Protocol string `json:"protocol,omitempty"`
}

// skippedToolInfo is a tool an MCP server lists that is not registered.
type skippedToolInfo struct {
	Tool   string `json:"tool"`
	Reason string `json:"reason"`
}

// mcpServers describes the MCP servers of m (nil without any).
func mcpServers(m *mcp.Manager) []mcpServerInfo {
	if m == nil {
		return nil
	}
	var out []mcpServerInfo
	for _, st := range m.Servers() {
		info := mcpServerInfo{Name: st.Name, State: st.State, Tools: st.Tools, Error: st.LastError, Protocol: st.Protocol}
		if !st.NextAttempt.IsZero() {
			next := st.NextAttempt.UTC()
			info.NextAttempt = &next
		}
		for _, sk := range st.Skipped {
			info.Skipped = append(info.Skipped, skippedToolInfo{Tool: sk.Tool, Reason: sk.Reason})
		}
		out = append(out, info)
	}
	return out
}

// cmdTools implements "tooldispatch tools". It needs the workspace (the
// file tools are registered only with one) but no store: the built-in tools
// touch the store only when they run.
func (e *env) cmdTools(args []string) error {
	o, err := e.parseFlags("tools", args)
	if err != nil {
		return err
	}
	log := newLogger(e.stderr, o.logLevel)
	ws, err := openWorkspace(o.workspace)
	if err != nil {
		return err
	}
	defer ws.Close()
	cfg, err := loadConfig(o.config, o.workspace, log)
	if err != nil {
		return failf(exitUsage, "%v", err)
	}
	// Listing tools touches no data directory: the tools get a store in
	// memory and a throwaway secrets key.
	scratch, err := os.MkdirTemp("", "tooldispatch-tools-")
	if err != nil {
		return failf(exitFailure, "%v", err)
	}
	defer os.RemoveAll(scratch)
	store := cachestore.NewMemory()
	defer store.Close()
	reg := toolkit.NewRegistry(cfg.Dispatcher.schemaOptions()...)
	ts, err := registerTools(reg, ws, store, scratch, o, cfg, nil, log)
	if err != nil {
		return failf(exitFailure, "%v", err)
	}
	defer ts.Close()
	if err := checkExclude(reg, cfg.Dispatcher.Exclude, log); err != nil {
		return failf(exitUsage, "%v", err)
	}

	if o.all {
		all := reg.All()
		out := struct {
			Tools      []toolInfo      `json:"tools"`
			MCPServers []mcpServerInfo `json:"mcp_servers,omitempty"`
		}{Tools: make([]toolInfo, 0, len(all)), MCPServers: mcpServers(ts.MCP)}
		for _, t := range all {
			if slices.Contains(cfg.Dispatcher.Exclude, t.Name) {
				continue
			}
			out.Tools = append(out.Tools, toolInfo{
				Name: t.Name, Description: t.Description, Parameters: t.Schema,
				Concurrent: t.Concurrent, ReadOnly: t.ReadOnlyLabel(),
				TimeoutMS: t.EffectiveTimeout().Milliseconds(), Source: t.Source,
				SchemaError: t.SchemaError, OutputSchema: t.OutputSchema,
			})
		}
		return writeOut(writeJSON(e.stdout, out))
	}
	view, err := toolkit.NewView(reg, o.provider, nil, cfg.Dispatcher.Exclude)
	if err != nil {
		return failf(exitFailure, "building the tools view: %v", err)
	}
	tools, refused := view.ArrayIn(o.toolsFormat)
	if o.toolsFormat == toolkit.ToolsOpenAI {
		refused = nil // the schemas are handed out as they are
	}
	return writeOut(writeJSON(e.stdout, toolsOutput{Tools: tools, Context: view.ContextText(), Refused: refused}))
}

// writeOut turns an error writing stdout into exit status 3.
func writeOut(err error) error {
	if err != nil {
		return failf(exitFailure, "writing the output: %v", err)
	}
	return nil
}
