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
// {"error": text}, as Gemini's documentation asks.
type GeminiFunctionResponse struct {
	ID       string            `json:"id"`
	Name     string            `json:"name"`
	Response map[string]string `json:"response"`
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
	return GeminiPart{FunctionResponse: GeminiFunctionResponse{ID: m.GetToolCallId(), Name: name,
		Response: map[string]string{key: m.GetContent()}}}
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
