package taumcp

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServerName is the name the server gives itself in the handshake.
const ServerName = "tau-airline"

// Server returns the MCP server offering w's tools. Every call is answered
// with Answer(name, arguments). When record is not nil, each call is
// written to it as a line "<tool> <arguments>", in the order received.
func Server(w *Workload, record io.Writer) *mcp.Server {
	var mu sync.Mutex
	srv := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: "1"}, nil)
	tools := slices.Clone(w.Tools)
	slices.SortFunc(tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range tools {
		name := t.Name
		srv.AddTool(&mcp.Tool{Name: name, Description: t.Description, InputSchema: t.Schema},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if record != nil {
					mu.Lock()
					_, _ = io.WriteString(record, name+" "+string(req.Params.Arguments)+"\n")
					mu.Unlock()
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: Answer(name, req.Params.Arguments)}}}, nil
			})
	}
	return srv
}

// Answer is the stub result of a call: a JSON object naming the tool and
// echoing the arguments, the size of a typical τ-bench airline answer
// (a reservation or a user record).
func Answer(tool string, args json.RawMessage) string {
	var b strings.Builder
	b.Grow(len(args) + 64)
	b.WriteString(`{"tool":`)
	q, _ := json.Marshal(tool)
	b.Write(q)
	b.WriteString(`,"status":"ok","request":`)
	if len(args) == 0 {
		b.WriteString("{}")
	} else {
		b.Write(args)
	}
	b.WriteString("}")
	return b.String()
}
