package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Helpers for the OpenAI chat-completions JSON shapes that callers send
// (the run command's input and the service's request bodies).

// ContentText reads the content of an assistant message: a string, null,
// or an array of content parts whose text parts are joined by newlines.
func ContentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case raw[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", errors.New(`must be a string, null or an array of content parts ({"type":"text","text":…})`)
		}
		var texts []string
		for _, p := range parts {
			if p.Type == "text" {
				texts = append(texts, p.Text)
			}
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", fmt.Errorf("must be a string, null or an array of content parts, not %s", JSONKind(raw))
}

// ArgumentsText returns a call's arguments as the JSON text the dispatcher
// takes: a JSON string as it is, any other value compacted (key order and
// duplicate keys kept, so the dispatcher's strict parser sees them; a value
// that is not an object is refused for that call alone), null as "".
func ArgumentsText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", nil
	case raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", err
	}
	return b.String(), nil
}

// JSONKind names the kind of a valid JSON value, for error messages.
func JSONKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// JSONTypeName names the JSON type a Go field of kind k takes, for error
// messages about a value of the wrong type (json.UnmarshalTypeError.Type).
func JSONTypeName(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map, reflect.Pointer:
		return "an object"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another JSON type"
}

// OpenAIToolCall is one tool call of an assistant message as a caller
// sends it.
type OpenAIToolCall struct {
	// Index is accepted and not used (it numbers streamed deltas).
	Index    json.RawMessage `json:"index,omitempty"`
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Function *OpenAIFunction `json:"function"`
}

// OpenAIFunction is the function part of an OpenAIToolCall; Arguments is
// a JSON string or, leniently, the object itself.
type OpenAIFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// OpenAIFunctionTool declares a client tool in the OpenAI function-tool
// shape.
type OpenAIFunctionTool struct {
	Type     string              `json:"type"`
	Function *OpenAIFunctionSpec `json:"function"`
}

// OpenAIFunctionSpec is the function part of an OpenAIFunctionTool.
type OpenAIFunctionSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	// Strict is accepted and not used.
	Strict json.RawMessage `json:"strict,omitempty"`
}

// AssistantFromOpenAI builds an AssistantMessage from its OpenAI parts;
// prefix names where the message sits in the request, for error messages
// (e.g. "message.").
func AssistantFromOpenAI(role string, content json.RawMessage, calls []OpenAIToolCall, prefix string) (*AssistantMessage, error) {
	if role != "" && role != "assistant" {
		return nil, fmt.Errorf("%srole is %q: a turn is an assistant message", prefix, role)
	}
	text, err := ContentText(content)
	if err != nil {
		return nil, fmt.Errorf("%scontent %w", prefix, err)
	}
	out := &AssistantMessage{Role: "assistant", Content: text}
	for i, c := range calls {
		tc := &ToolCall{Id: c.ID, Type: c.Type, Function: &FunctionCall{}}
		if tc.Type == "" {
			tc.Type = "function"
		}
		if c.Function != nil {
			tc.Function.Name = c.Function.Name
			args, err := ArgumentsText(c.Function.Arguments)
			if err != nil {
				return nil, fmt.Errorf("%stool_calls[%d].function.arguments: %w", prefix, i, err)
			}
			tc.Function.Arguments = args
		}
		out.ToolCalls = append(out.ToolCalls, tc)
	}
	return out, nil
}

// ToolSpecsFromOpenAI converts client tools declared in the OpenAI
// function-tool shape.
func ToolSpecsFromOpenAI(tools []OpenAIFunctionTool) ([]*ToolSpec, error) {
	out := make([]*ToolSpec, 0, len(tools))
	for i, ct := range tools {
		spec, err := toolSpecFromOpenAI(i, ct)
		if err != nil {
			return nil, err
		}
		out = append(out, spec)
	}
	return out, nil
}

// toolSpecFromOpenAI converts client_tools[i] in the function-tool shape.
func toolSpecFromOpenAI(i int, ct OpenAIFunctionTool) (*ToolSpec, error) {
	if ct.Type != "" && ct.Type != "function" {
		return nil, fmt.Errorf("client_tools[%d].type must be \"function\", not %q", i, ct.Type)
	}
	if ct.Function == nil {
		return nil, fmt.Errorf(`client_tools[%d] has no function: the shape is {"type":"function","function":{"name","description","parameters"}} (or Anthropic's {"name","description","input_schema"})`, i)
	}
	if ct.Function.Name == "" {
		return nil, fmt.Errorf("client_tools[%d].function.name is empty", i)
	}
	params, err := schemaText(ct.Function.Parameters, "function.parameters", i)
	if err != nil {
		return nil, err
	}
	return &ToolSpec{Name: ct.Function.Name, Description: ct.Function.Description, Parameters: params}, nil
}
