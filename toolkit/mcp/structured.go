package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Structured results. A tool may declare an outputSchema and return
// structuredContent: the structured content is what the tool means, and
// reaches the model as JSON text, first, once checked against the schema.
// A server is untrusted, so a result that does not match its schema (or
// lacks the structured content the schema promises) is no result: the call
// ends in error, naming the fields. A text block that only repeats the
// structured content (MCP asks servers to send one for older clients), as
// JSON or as the one string it holds (a file server's {"content": text}),
// is left out; any other block follows.

// outputSchemaOf returns t's output schema as JSON, nil when it declares
// none.
func outputSchemaOf(t *mcp.Tool) ([]byte, error) {
	if t.OutputSchema == nil {
		return nil, nil
	}
	b, err := json.Marshal(t.OutputSchema)
	if err != nil {
		return nil, fmt.Errorf("outputSchema: %w", err)
	}
	if string(b) == "null" {
		return nil, nil
	}
	if len(b) > maxSchemaBytes {
		return nil, fmt.Errorf("its output schema of %s is over the %s a tool's schema may have", sizeText(len(b)), sizeText(maxSchemaBytes))
	}
	return b, nil
}

// structured returns res's structured content as compact JSON text,
// checked against outSchema (nil: the tool declares none); "" when res has
// none and none was promised. Not for results flagged isError.
func (s *server) structured(res *mcp.CallToolResult, tool string, outSchema []byte) (string, error) {
	if res.StructuredContent == nil {
		if outSchema != nil {
			return "", fmt.Errorf("MCP server %q: tool %s declares an outputSchema but its result has no structuredContent", s.name, tool)
		}
		return "", nil
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return "", fmt.Errorf("MCP server %q: tool %s: structuredContent: %w", s.name, tool, err)
	}
	if outSchema == nil {
		return string(raw), nil
	}
	sch, err := s.m.reg.Schemas.Compile(outSchema)
	if err != nil {
		return "", fmt.Errorf("MCP server %q: tool %s: its outputSchema does not compile, so its result cannot be checked: %w", s.name, tool, err)
	}
	if err := sch.ValidateValue(decodeNumbers(raw)); err != nil {
		var ve *toolkit.ValidationError
		if errors.As(err, &ve) {
			msgs := make([]string, len(ve.Fields))
			for i, f := range ve.Fields {
				msgs[i] = f.Message
			}
			return "", fmt.Errorf("MCP server %q: tool %s sent structured content that does not match its outputSchema: %s",
				s.name, tool, strings.Join(msgs, "; "))
		}
		return "", fmt.Errorf("MCP server %q: tool %s: checking its structured content: %w", s.name, tool, err)
	}
	return string(raw), nil
}

// decodeNumbers decodes JSON keeping numbers as json.Number.
func decodeNumbers(raw []byte) any {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil
	}
	return v
}

// repeats reports whether text only repeats structured: it is the JSON of
// the same value, or the value of one of its top-level strings.
func repeats(text, structured string) bool {
	v := decodeNumbers([]byte(structured))
	if obj, ok := v.(map[string]any); ok {
		for _, f := range obj {
			if s, ok := f.(string); ok && s == text {
				return true
			}
		}
	}
	t := strings.TrimSpace(text)
	if !json.Valid([]byte(t)) {
		return false
	}
	a := decodeNumbers([]byte(t))
	return a != nil && reflect.DeepEqual(a, v)
}
