package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The Google Gemini shapes: a model content whose parts hold functionCall
// parts comes in ({"role":"model","parts":[{"functionCall":{"id"?,"name",
// "args":{…}}}]}); one user content of functionResponse parts goes back.
// Field names are read in the REST API's camelCase and, as protobuf JSON
// allows, in snake_case (function_call, as the Python SDK dumps them).

// geminiPart is one part of a Gemini content, as far as the dispatcher
// reads it. Parts of other kinds (thought summaries, inline data,
// executable code…) and fields not listed here (thoughtSignature…) are
// ignored.
type geminiPart struct {
	Text              *string             `json:"text"`
	Thought           bool                `json:"thought"`
	FunctionCall      *geminiFunctionCall `json:"functionCall"`
	FunctionCallSnake *geminiFunctionCall `json:"function_call"`
}

// geminiFunctionCall is the functionCall of a part. Args is an object; a
// value of another kind is kept and refused for that call alone.
type geminiFunctionCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// assistantFromGemini builds an AssistantMessage from a Gemini model
// content: one call per functionCall part, in order, the text parts that
// are not thoughts joined by newlines. Each args keeps its bytes, so the
// dispatcher's strict parser refuses a duplicate key as it would in an
// OpenAI arguments string. Only the parts of the content itself are read:
// a functionCall nested anywhere else (inside args, inside a
// functionResponse) is data, never a call.
func assistantFromGemini(role string, parts json.RawMessage, prefix string) (*AssistantMessage, error) {
	if role != "" && role != "model" && role != "assistant" {
		return nil, fmt.Errorf("%srole is %q: a turn is the model's content", prefix, ClipText(role, 40))
	}
	out := &AssistantMessage{Role: "assistant"}
	if !present(parts) {
		return out, nil
	}
	where := prefix + "parts"
	dec := json.NewDecoder(bytes.NewReader(parts))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, fmt.Errorf("%s must be an array of parts, not %s", where, JSONKind(parts))
	}
	var texts []string
	for i := 0; dec.More(); i++ {
		if i >= MaxMessageItems {
			return nil, fmt.Errorf("%s has more than %d parts", where, MaxMessageItems)
		}
		var p geminiPart
		if err := dec.Decode(&p); err != nil {
			return nil, itemError(err, where, i, "a Gemini part")
		}
		fc := p.FunctionCall
		if fc == nil {
			fc = p.FunctionCallSnake
		} else if p.FunctionCallSnake != nil {
			return nil, fmt.Errorf("%s[%d] has both functionCall and function_call: one part carries one call", where, i)
		}
		switch {
		case fc != nil:
			args, err := inputText(fc.Args)
			if err != nil {
				return nil, fmt.Errorf("%s[%d].functionCall.args: %w", where, i, err)
			}
			out.ToolCalls = append(out.ToolCalls, &ToolCall{Id: fc.ID, Type: "function",
				Function: &FunctionCall{Name: fc.Name, Arguments: args}})
		case p.Text != nil && !p.Thought:
			texts = append(texts, *p.Text)
		}
	}
	if _, err := dec.Token(); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	out.Content = strings.Join(texts, "\n")
	return out, nil
}

// GeminiFunctionResponse is the functionResponse of a part: one call's
// result, paired with its call by id (made up when the call had none) and
// name. Response is {"output": text} or, when the call failed (IsError),
// {"error": text}, as Gemini's documentation asks; Parts are the images
// the result carries (parts.go).
type GeminiFunctionResponse struct {
	ID       string               `json:"id"`
	Name     string               `json:"name"`
	Response map[string]string    `json:"response"`
	Parts    []GeminiResponsePart `json:"parts,omitempty"`
}

// GeminiPart is a part carrying one functionResponse.
type GeminiPart struct {
	FunctionResponse GeminiFunctionResponse `json:"functionResponse"`
}

// GeminiContent is the user content that carries a turn's results.
type GeminiContent struct {
	Role  string       `json:"role"`
	Parts []GeminiPart `json:"parts"`
}

// GeminiResult is m as a functionResponse part; name is the name the
// model called (Gemini pairs a response with its call by name as well as
// id), m's own name when empty.
func GeminiResult(m *ToolMessage, name string) GeminiPart {
	if name == "" {
		name = m.GetName()
	}
	key := "output"
	if IsError(m.GetStatus()) {
		key = "error"
	}
	parts, note := geminiParts(m)
	return GeminiPart{FunctionResponse: GeminiFunctionResponse{ID: m.GetToolCallId(), Name: name,
		Response: map[string]string{key: withNote(m.GetContent(), note)}, Parts: parts}}
}

// GeminiReply is the user content carrying ms as functionResponse parts,
// in call order; names[i] is the name the model gave call i ("" for m's
// own).
func GeminiReply(ms []*ToolMessage, names []string) GeminiContent {
	out := GeminiContent{Role: "user", Parts: make([]GeminiPart, len(ms))}
	for i, m := range ms {
		var name string
		if i < len(names) {
			name = names[i]
		}
		out.Parts[i] = GeminiResult(m, name)
	}
	return out
}

// toolSpecFromGemini converts client_tools[at], a Gemini
// FunctionDeclaration: parametersJsonSchema is JSON Schema as it is;
// parameters, in Gemini's OpenAPI subset, becomes JSON Schema (GeminiSchema).
func toolSpecFromGemini(at string, ct ClientTool) (*ToolSpec, error) {
	if ct.Name == "" {
		return nil, fmt.Errorf("client_tools[%s].name is empty", at)
	}
	if present(ct.Parameters) && present(ct.ParametersJSONSchema) {
		return nil, fmt.Errorf("client_tools[%s] has both parameters and parametersJsonSchema: Gemini takes one", at)
	}
	raw := ct.ParametersJSONSchema
	if present(ct.Parameters) {
		var err error
		if raw, err = GeminiSchema(ct.Parameters); err != nil {
			return nil, fmt.Errorf("client_tools[%s].parameters: %w", at, err)
		}
	}
	params := ""
	if present(raw) {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return nil, fmt.Errorf("client_tools[%s]: %w", at, err)
		}
		if b.Len() == 0 || b.Bytes()[0] != '{' {
			return nil, fmt.Errorf("client_tools[%s]: the parameters must be a schema object, not %s", at, JSONKind(b.Bytes()))
		}
		params = b.String()
	}
	return &ToolSpec{Name: ct.Name, Description: ct.Description, Parameters: params}, nil
}

// GeminiSchema turns a schema in Gemini's OpenAPI subset (the Schema of a
// FunctionDeclaration's parameters) into JSON Schema: type names in lower
// case, nullable as a "null" type (or a null enum value), the int64
// bounds Gemini writes as strings as numbers, example as examples;
// propertyOrdering is dropped.
func GeminiSchema(raw json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	out, err := geminiToJSONSchema(v, 0)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// maxGeminiSchemaDepth bounds the nesting GeminiSchema follows.
const maxGeminiSchemaDepth = 64

func geminiToJSONSchema(v any, depth int) (any, error) {
	if depth > maxGeminiSchemaDepth {
		return nil, fmt.Errorf("the schema nests deeper than %d levels", maxGeminiSchemaDepth)
	}
	n, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a schema must be an object, not %T", v)
	}
	out := make(map[string]any, len(n))
	for k, x := range n {
		switch k {
		case "type":
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("type must be a string")
			}
			out[k] = strings.ToLower(s)
		case "minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties":
			s := fmt.Sprint(x)
			if _, err := json.Number(s).Int64(); err != nil {
				return nil, fmt.Errorf("%s must be an integer, not %q", k, ClipText(s, 40))
			}
			out[k] = json.Number(s)
		case "properties":
			props, ok := x.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("properties must be an object")
			}
			conv := make(map[string]any, len(props))
			for name, p := range props {
				c, err := geminiToJSONSchema(p, depth+1)
				if err != nil {
					return nil, fmt.Errorf("properties.%s: %w", name, err)
				}
				conv[name] = c
			}
			out[k] = conv
		case "items":
			c, err := geminiToJSONSchema(x, depth+1)
			if err != nil {
				return nil, fmt.Errorf("items: %w", err)
			}
			out[k] = c
		case "anyOf":
			alts, ok := x.([]any)
			if !ok {
				return nil, fmt.Errorf("anyOf must be an array")
			}
			conv := make([]any, len(alts))
			for i, a := range alts {
				c, err := geminiToJSONSchema(a, depth+1)
				if err != nil {
					return nil, fmt.Errorf("anyOf[%d]: %w", i, err)
				}
				conv[i] = c
			}
			out[k] = conv
		case "example":
			out["examples"] = []any{x}
		case "nullable", "propertyOrdering":
		default:
			out[k] = x
		}
	}
	if n["nullable"] == true {
		if t, ok := out["type"].(string); ok {
			out["type"] = []any{t, "null"}
		}
		if e, ok := out["enum"].([]any); ok {
			out["enum"] = append(e, nil)
		}
	}
	if out["format"] == "enum" {
		delete(out, "format")
	}
	return out, nil
}
