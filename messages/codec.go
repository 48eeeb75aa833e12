package messages

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	// FormatResponses is the OpenAI Responses shape (and the Open
	// Responses specification's): the message is the array of a
	// response's output items, function_call items among them.
	FormatResponses Format = "responses"
	// FormatGemini is the Google Gemini shape: a content whose parts hold
	// functionCall parts, with args as a JSON object and ids often absent.
	FormatGemini Format = "gemini"
)

// Formats lists the formats a message may come in.
var Formats = []Format{FormatOpenAI, FormatAnthropic, FormatResponses, FormatGemini}

// ParseFormat reads a format option: "" (detect it from the message),
// "openai", "anthropic", "responses" or "gemini".
func ParseFormat(s string) (Format, error) {
	f := Format(s)
	if f == "" || slices.Contains(Formats, f) {
		return f, nil
	}
	return "", fmt.Errorf("format must be %q, %q, %q or %q, not %q", FormatOpenAI, FormatAnthropic, FormatResponses, FormatGemini, ClipText(s, 40))
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
	// ShapeResponses is one function_call_output item per call with the
	// call's status (and injected fault) in an extra "tooldispatch"
	// object: the default for Responses turns.
	ShapeResponses Shape = "responses"
	// ShapeResponsesStrict is one function_call_output item per call with
	// type, call_id and output and nothing else. The statuses stay in the
	// events.
	ShapeResponsesStrict Shape = "responses-strict"
	// ShapeGemini is one user content whose parts hold a functionResponse
	// per call, its response {"output":…} or, on failures, {"error":…}.
	ShapeGemini Shape = "gemini"
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
// the caller asked for reply r: an Anthropic or Gemini message gets its
// own shape whatever r says; a Responses one gets function_call_output
// items, strict when r is ShapeOpenAIStrict; a chat-completions one gets r.
func ReplyShape(f Format, r Shape) Shape {
	switch {
	case f == FormatAnthropic:
		return ShapeAnthropic
	case f == FormatGemini:
		return ShapeGemini
	case f == FormatResponses && r == ShapeOpenAIStrict:
		return ShapeResponsesStrict
	case f == FormatResponses:
		return ShapeResponses
	case r == "":
		return ShapeOpenAI
	}
	return r
}

// Assistant is an assistant message as a caller sends it, in any format:
// OpenAI's tool_calls, Anthropic's tool_use blocks inside content, a
// Gemini content's parts, or (Items) the array of a Responses response's
// output items. Decode it with DecodeAssistant (an object may also be
// decoded with json.Unmarshal) and never with DisallowUnknownFields: the
// fields a message may carry besides these (OpenRouter's
// reasoning_details, refusal, annotations, audio, Anthropic's id, model,
// stop_reason, usage, Gemini's thoughtSignature…) are ignored, so a
// model's reply can be passed on as it came.
type Assistant struct {
	Role      string           `json:"role"`
	Content   json.RawMessage  `json:"content"`
	ToolCalls []OpenAIToolCall `json:"tool_calls"`
	// Parts are a Gemini content's parts.
	Parts json.RawMessage `json:"parts"`
	// Items is set when the message is a JSON array: a Responses
	// response's output items, read by Convert.
	Items json.RawMessage `json:"-"`
}

// DecodeAssistant decodes an assistant message of any format; unknown
// fields are ignored. An array is kept whole as Responses output items
// (Items). prefix names where the message sits, for error messages (e.g.
// "message."). Convert turns it into an AssistantMessage.
func DecodeAssistant(raw []byte, prefix string) (*Assistant, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("%s is missing: it must be an assistant message", cmp.Or(strings.TrimSuffix(prefix, "."), "the message"))
	}
	if raw[0] == '[' {
		return &Assistant{Items: raw}, nil
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

// Detect tells the format of a: Responses when it is an array (of output
// items); Gemini when it has parts and neither tool_calls nor content;
// Anthropic when its content holds tool_use blocks and it has no
// tool_calls; OpenAI otherwise.
func (a *Assistant) Detect() Format {
	switch {
	case a.Items != nil:
		return FormatResponses
	case present(a.Parts) && a.ToolCalls == nil && !present(a.Content):
		return FormatGemini
	case a.ToolCalls == nil && hasToolUse(a.Content):
		return FormatAnthropic
	}
	return FormatOpenAI
}

// present reports whether a field was given and is not null.
func present(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && string(raw) != "null"
}

// Convert builds the AssistantMessage the dispatcher takes from a in
// format f ("" detects it) and returns the format used. Arguments keep
// their bytes (key order, duplicate keys), so the dispatcher's strict
// parser judges them whatever the format. Every call gets the id its reply
// will carry (the pairing rule, ids.go). prefix names where the message
// sits, for error messages (e.g. "message.").
func (a *Assistant) Convert(f Format, prefix string) (*AssistantMessage, Format, error) {
	if f == "" {
		f = a.Detect()
	}
	m, err := a.convert(f, prefix)
	if err != nil {
		return nil, f, err
	}
	pairIDs(m.ToolCalls)
	return m, f, nil
}

func (a *Assistant) convert(f Format, prefix string) (*AssistantMessage, error) {
	if f != FormatResponses && a.Items != nil {
		return nil, fmt.Errorf("%s is an array, the shape of Responses output items, not of a %s message", cmp.Or(strings.TrimSuffix(prefix, "."), "the message"), f)
	}
	if f != FormatGemini && present(a.Parts) {
		return nil, fmt.Errorf("%sparts is the Gemini shape, not the %s one", prefix, f)
	}
	switch f {
	case FormatResponses:
		if a.Items == nil {
			return nil, fmt.Errorf("%s must be an array of Responses output items (a response's output), not an object", cmp.Or(strings.TrimSuffix(prefix, "."), "the message"))
		}
		return assistantFromResponses(a.Items, prefix)
	case FormatGemini:
		if a.ToolCalls != nil || present(a.Content) {
			return nil, fmt.Errorf("%stool_calls and content are not the Gemini shape: a Gemini content carries functionCall parts in parts", prefix)
		}
		return assistantFromGemini(a.Role, a.Parts, prefix)
	case FormatAnthropic:
		if len(a.ToolCalls) > 0 {
			return nil, fmt.Errorf("%stool_calls is the OpenAI shape: an Anthropic message carries tool_use blocks in its content", prefix)
		}
		return assistantFromAnthropic(a.Role, a.Content, prefix)
	}
	return AssistantFromOpenAI(a.Role, a.Content, a.ToolCalls, prefix)
}

// ClientTool declares a client tool in any format: the chat-completions
// function tool {"type":"function","function":{"name","description",
// "parameters"}}, the Responses API's flat one {"type":"function","name",
// "description","parameters"}, Anthropic's {"name","description",
// "input_schema"}, a Gemini FunctionDeclaration {"name","description",
// "parameters"|"parametersJsonSchema"} or a Gemini Tool
// {"functionDeclarations":[…]} holding several.
type ClientTool struct {
	Type     string              `json:"type"`
	Function *OpenAIFunctionSpec `json:"function"`
	// Anthropic's, the Responses API's and Gemini's shapes.
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	// Parameters is JSON Schema in the Responses shape, Gemini's OpenAPI
	// subset in a FunctionDeclaration (upper-case types, nullable).
	Parameters           json.RawMessage `json:"parameters"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
	FunctionDeclarations []ClientTool    `json:"functionDeclarations"`
	// CacheControl and Strict are accepted and not used.
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
	Strict       json.RawMessage `json:"strict,omitempty"`
}

// ToolSpecs converts client tools declared in any of ClientTool's shapes,
// told apart by their fields: function (chat completions), input_schema
// (Anthropic), type "function" with parameters (Responses),
// functionDeclarations or parametersJsonSchema, or parameters without a
// type (Gemini).
func ToolSpecs(tools []ClientTool) ([]*ToolSpec, error) {
	out := make([]*ToolSpec, 0, len(tools))
	for i, ct := range tools {
		if ct.FunctionDeclarations != nil {
			if ct.Function != nil || ct.Name != "" || present(ct.Parameters) || len(ct.InputSchema) > 0 {
				return nil, fmt.Errorf("client_tools[%d] mixes the shapes: a Gemini Tool holds only functionDeclarations", i)
			}
			for j, d := range ct.FunctionDeclarations {
				spec, err := toolSpecFromGemini(fmt.Sprintf("%d].functionDeclarations[%d", i, j), d)
				if err != nil {
					return nil, err
				}
				out = append(out, spec)
			}
			continue
		}
		var (
			spec *ToolSpec
			err  error
		)
		switch {
		case ct.Function == nil && len(ct.InputSchema) > 0:
			spec, err = toolSpecFromAnthropic(i, ct)
		case ct.Function == nil && ct.Type == "function" && ct.Name != "":
			spec, err = toolSpecFromResponses(i, ct)
		case ct.Function == nil && ct.Type == "" && ct.Name != "" && (present(ct.Parameters) || present(ct.ParametersJSONSchema)):
			spec, err = toolSpecFromGemini(fmt.Sprint(i), ct)
		default:
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

// toolSpecFromResponses converts client_tools[i] in the Responses API's
// flat function-tool shape.
func toolSpecFromResponses(i int, ct ClientTool) (*ToolSpec, error) {
	params, err := schemaText(ct.Parameters, "parameters", i)
	if err != nil {
		return nil, err
	}
	return &ToolSpec{Name: ct.Name, Description: ct.Description, Parameters: params}, nil
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
