package messages

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The JSON codec of the conversation shapes callers speak: what comes in
// (an assistant message, client tools) and what goes back (tool results,
// events, a session's history). The run command, the service and
// embedders use these, so every door speaks the same shapes.

// Format names the shape of the assistant messages a caller sends.
type Format string

const (
	// FormatOpenAI is the OpenAI chat-completions shape: tool_calls with
	// arguments as a JSON string.
	FormatOpenAI Format = "openai"
	// FormatAnthropic is the Anthropic Messages shape: tool_use blocks in
	// the content, with input as a JSON object.
	FormatAnthropic Format = "anthropic"
)

// ParseFormat reads a format option: "" (detect it from the message),
// "openai" or "anthropic".
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case "", FormatOpenAI, FormatAnthropic:
		return f, nil
	}
	return "", fmt.Errorf("format must be %q or %q, not %q", FormatOpenAI, FormatAnthropic, ClipText(s, 40))
}

// Shape names the shape of the tool results handed back.
type Shape string

const (
	// ShapeOpenAI is one OpenAI tool message per call with the call's
	// name and status (and the injected fault in chaos mode): the default.
	ShapeOpenAI Shape = "openai"
	// ShapeOpenAIStrict is one OpenAI tool message per call with role,
	// tool_call_id and content and nothing else, for servers that refuse
	// other properties. The statuses stay in the events.
	ShapeOpenAIStrict Shape = "openai-strict"
	// ShapeAnthropic is one user message whose content holds a
	// tool_result block per call, is_error set on failures (IsError).
	ShapeAnthropic Shape = "anthropic"
)

// ParseReply reads a reply option: "" or "openai" (ShapeOpenAI), or
// "openai-strict".
func ParseReply(s string) (Shape, error) {
	switch Shape(s) {
	case "", ShapeOpenAI:
		return ShapeOpenAI, nil
	case ShapeOpenAIStrict:
		return ShapeOpenAIStrict, nil
	}
	return "", fmt.Errorf("reply must be %q or %q, not %q", ShapeOpenAI, ShapeOpenAIStrict, ClipText(s, 40))
}

// ReplyShape is the shape of the results of a message in format f when
// the caller asked for reply r: an Anthropic message gets Anthropic
// results whatever r says, an OpenAI one gets r.
func ReplyShape(f Format, r Shape) Shape {
	switch {
	case f == FormatAnthropic:
		return ShapeAnthropic
	case r == "":
		return ShapeOpenAI
	}
	return r
}

// Assistant is an assistant message as a caller sends it, in either
// format: OpenAI's tool_calls, or Anthropic's tool_use blocks inside
// content. Decode it with json.Unmarshal (or DecodeAssistant) and never
// with DisallowUnknownFields: the fields a message may carry besides these
// (OpenRouter's reasoning_details, refusal, annotations, audio, Anthropic's
// id, model, stop_reason, usage…) are ignored, so a model's reply can be
// passed on as it came.
type Assistant struct {
	Role      string           `json:"role"`
	Content   json.RawMessage  `json:"content"`
	ToolCalls []OpenAIToolCall `json:"tool_calls"`
}

// DecodeAssistant decodes an assistant message of either format; unknown
// fields are ignored. prefix names where the message sits, for error
// messages (e.g. "message."). Convert turns it into an AssistantMessage.
func DecodeAssistant(raw []byte, prefix string) (*Assistant, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("%s is missing: it must be an assistant message", cmp.Or(strings.TrimSuffix(prefix, "."), "the message"))
	}
	var a Assistant
	if err := json.Unmarshal(raw, &a); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return nil, fmt.Errorf("%s must be an object (an assistant message), not %s", cmp.Or(strings.TrimSuffix(prefix, "."), "the message"), JSONKind(raw))
			}
			return nil, fmt.Errorf("%s%s must be %s, not %s (byte offset %d of the message)", prefix, te.Field, JSONTypeName(te.Type.Kind()), te.Value, max(te.Offset-1, 0))
		}
		return nil, err
	}
	return &a, nil
}

// Detect tells the format of a: Anthropic when its content holds tool_use
// blocks and it has no tool_calls, OpenAI otherwise.
func (a *Assistant) Detect() Format {
	if a.ToolCalls == nil && hasToolUse(a.Content) {
		return FormatAnthropic
	}
	return FormatOpenAI
}

// Convert builds the AssistantMessage the dispatcher takes from a in
// format f ("" detects it) and returns the format used. Arguments keep
// their bytes (key order, duplicate keys), so the dispatcher's strict
// parser judges them whatever the format. prefix names where the message
// sits, for error messages (e.g. "message.").
func (a *Assistant) Convert(f Format, prefix string) (*AssistantMessage, Format, error) {
	if f == "" {
		f = a.Detect()
	}
	if f == FormatAnthropic {
		if len(a.ToolCalls) > 0 {
			return nil, f, fmt.Errorf("%stool_calls is the OpenAI shape: an Anthropic message carries tool_use blocks in its content", prefix)
		}
		m, err := assistantFromAnthropic(a.Role, a.Content, prefix)
		return m, f, err
	}
	m, err := AssistantFromOpenAI(a.Role, a.Content, a.ToolCalls, prefix)
	return m, f, err
}

// ClientTool declares a client tool in either format: OpenAI's function
// tool {"type":"function","function":{"name","description","parameters"}}
// or Anthropic's {"name","description","input_schema"}.
type ClientTool struct {
	Type     string              `json:"type"`
	Function *OpenAIFunctionSpec `json:"function"`
	// Anthropic's shape.
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	// CacheControl is accepted and not used.
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// ToolSpecs converts client tools declared in either format. A tool with
// input_schema and no function is in Anthropic's shape.
func ToolSpecs(tools []ClientTool) ([]*ToolSpec, error) {
	out := make([]*ToolSpec, 0, len(tools))
	for i, ct := range tools {
		var (
			spec *ToolSpec
			err  error
		)
		if ct.Function == nil && len(ct.InputSchema) > 0 {
			spec, err = toolSpecFromAnthropic(i, ct)
		} else {
			if ct.Function != nil && (ct.Name != "" || ct.Description != "") {
				return nil, fmt.Errorf(`client_tools[%d] mixes the shapes: OpenAI's is {"type":"function","function":{"name","description","parameters"}}, Anthropic's {"name","description","input_schema"}`, i)
			}
			spec, err = toolSpecFromOpenAI(i, OpenAIFunctionTool{Type: ct.Type, Function: ct.Function})
		}
		if err != nil {
			return nil, err
		}
		out = append(out, spec)
	}
	return out, nil
}

// schemaText compacts a tool's JSON Schema; absent or null is "".
func schemaText(raw json.RawMessage, field string, i int) (string, error) {
	switch p := bytes.TrimSpace(raw); {
	case len(p) == 0 || string(p) == "null":
		return "", nil
	case p[0] == '{':
		var b bytes.Buffer
		if err := json.Compact(&b, p); err != nil {
			return "", fmt.Errorf("client_tools[%d].%s: %w", i, field, err)
		}
		return b.String(), nil
	default:
		return "", fmt.Errorf("client_tools[%d].%s must be a JSON Schema object, not %s", i, field, JSONKind(p))
	}
}

// ClipText shortens s to at most n bytes, cut on a character boundary
// (protobuf strings must stay valid UTF-8), and marks the cut with "…". It
// is the one clip of texts for messages, errors and events.
func ClipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
