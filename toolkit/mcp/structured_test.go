package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit/mcp/mcptest"
)

// TestStructuredContentIsChecked: a tool's structured content reaches the
// model as JSON text once it matches the tool's outputSchema (the text
// block repeating it left out, other blocks after it); content that breaks
// the schema, or is missing where the schema promises it, ends the call in
// error naming the field. The tool carries its output schema.
func TestStructuredContentIsChecked(t *testing.T) {
	srv, _ := misbehavingServer(t, "wx", mcptest.ModeStructured)
	h := newHarness(t, []ServerConfig{srv})
	h.start()
	var out map[string]any
	if err := json.Unmarshal(h.tool("mcp__wx__weather").OutputSchema, &out); err != nil || out["required"] == nil {
		t.Errorf("output schema = %s (%v); want the tool's outputSchema", h.tool("mcp__wx__weather").OutputSchema, err)
	}
	if h.tool("mcp__wx__echo").OutputSchema != nil {
		t.Errorf("echo declares no output schema, has %s", h.tool("mcp__wx__echo").OutputSchema)
	}

	got, err := h.call(context.Background(), "mcp__wx__weather", `{"mode":"honest"}`)
	if want := "{\"conditions\":\"Sunny\",\"temperature\":21}\nForecast by mcptest."; err != nil || got != want {
		t.Errorf("honest = %q, %v; want %q", got, err, want)
	}
	_, err = h.call(context.Background(), "mcp__wx__weather", `{"mode":"liar"}`)
	if err == nil || !strings.Contains(err.Error(), `does not match its outputSchema: field "temperature": want number, got string`) {
		t.Errorf("liar: %v; want an error naming the field", err)
	}
	_, err = h.call(context.Background(), "mcp__wx__weather", `{"mode":"missing"}`)
	if err == nil || !strings.Contains(err.Error(), "declares an outputSchema but its result has no structuredContent") {
		t.Errorf("missing: %v; want an error saying the structured content is missing", err)
	}
}
