package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolSchemas checks tools whose schemas use ECMA-262 patterns (as
// zod-generated servers send) and a schema that cannot be compiled: the first
// validates like any other, the second is registered with the reason, so the
// model and the operator can see it.
func TestToolSchemas(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "schemas-test", Version: "1"}, nil)
	echo := func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return textResult(string(req.Params.Arguments)), nil
	}
	srv.AddTool(&mcp.Tool{
		Name:        "lookahead",
		Description: "Names that do not start with tmp_.",
		InputSchema: json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"name":{"type":"string","pattern":"^(?!tmp_)[a-z_]+$"}},"required":["name"]}`),
	}, echo)
	srv.AddTool(&mcp.Tool{
		Name:        "broken",
		Description: "A schema no validator accepts.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":"one"}}}`),
	}, echo)
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(handler)
	t.Cleanup(ts.Close)
	h := newHarness(t, []ServerConfig{{Name: "s", URL: ts.URL, Trusted: true}})
	h.start()

	t.Run("lookahead pattern", func(t *testing.T) {
		sch, err := h.reg.Schemas.Compile(h.tool("mcp__s__lookahead").Schema)
		if err != nil {
			t.Fatalf("compile: %v", err)
		}
		if err := sch.Validate(map[string]any{"name": "data_set"}); err != nil {
			t.Errorf("valid name refused: %v", err)
		}
		err = sch.Validate(map[string]any{"name": "tmp_x"})
		if err == nil || !strings.Contains(err.Error(), "must match pattern `^(?!tmp_)[a-z_]+$`") {
			t.Errorf("invalid name: %v; want the pattern named", err)
		}
	})

	t.Run("schema that does not compile is visible", func(t *testing.T) {
		tool, ok := h.reg.Lookup("mcp__s__broken")
		if !ok {
			t.Fatalf("the tool was dropped; registered: %v", h.names(""))
		}
		if !strings.Contains(tool.SchemaError, "minimum") {
			t.Errorf("SchemaError = %q; want the reason", tool.SchemaError)
		}
	})
}
