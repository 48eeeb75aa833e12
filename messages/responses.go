package messages

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The OpenAI Responses shapes (also the Open Responses specification's):
// the output items of a response come in, function_call items among
// message, reasoning and other items; one function_call_output item per
// call goes back.

// MaxMessageItems bounds the Responses output items and the Gemini parts
// of one message: a message with more is refused before anything is
// decoded further, so an array of millions of tiny items cannot turn a
// bounded body into an unbounded amount of memory.
const MaxMessageItems = 1 << 16

// Item types of a Responses output the dispatcher reads; every other type
// (reasoning, web_search_call, mcp_call, computer_call…) is ignored, as an
// unknown field of a chat-completions message is.
const (
	itemFunctionCall   = "function_call"
	itemCustomToolCall = "custom_tool_call"
	itemMessage        = "message"
)

// responseItem is one output item of a Responses response, as far as the
// dispatcher reads it.
type responseItem struct {
	Type string `json:"type"`
	// function_call
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// message
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// assistantFromResponses builds an AssistantMessage from the output items
// of a Responses response: one call per function_call item, in order, the
// output_text parts of message items joined by newlines. Arguments keep
// their bytes. A custom_tool_call item (a free-text tool) refuses the
// message: tooldispatch's tools take JSON objects, and a free-text input
// that happened to be one must not run as if it were.
func assistantFromResponses(items json.RawMessage, prefix string) (*AssistantMessage, error) {
	where := cmp.Or(strings.TrimSuffix(prefix, "."), "message")
	dec := json.NewDecoder(bytes.NewReader(items))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, fmt.Errorf("%s must be an array of Responses output items", where)
	}
	out := &AssistantMessage{Role: "assistant"}
	var texts []string
	for i := 0; dec.More(); i++ {
		if i >= MaxMessageItems {
			return nil, fmt.Errorf("%s has more than %d output items", where, MaxMessageItems)
		}
		var it responseItem
		if err := dec.Decode(&it); err != nil {
			return nil, itemError(err, where, i, "a Responses output item")
		}
		at := fmt.Sprintf("%s[%d]", where, i)
		switch it.Type {
		case itemFunctionCall:
			args, err := ArgumentsText(it.Arguments)
			if err != nil {
				return nil, fmt.Errorf("%s.arguments: %w", at, err)
			}
			out.ToolCalls = append(out.ToolCalls, &ToolCall{Id: it.CallID, Type: "function",
				Function: &FunctionCall{Name: it.Name, Arguments: args}})
		case itemCustomToolCall:
			return nil, fmt.Errorf("%s is a custom_tool_call (%q): custom (free-text) tools are not supported; declare the tool as a function tool, whose arguments are a JSON object", at, ClipText(it.Name, 64))
		case itemMessage:
			if it.Role != "" && it.Role != "assistant" {
				return nil, fmt.Errorf("%s.role is %q: a turn holds the assistant's output", at, ClipText(it.Role, 40))
			}
			text, err := outputText(it.Content)
			if err != nil {
				return nil, fmt.Errorf("%s.content %w", at, err)
			}
			if text != "" {
				texts = append(texts, text)
			}
		}
	}
	if _, err := dec.Token(); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	out.Content = strings.Join(texts, "\n")
	return out, nil
}

// outputText reads the content of a Responses message item: its
// output_text parts joined by newlines (refusal and other parts are left
// out); a string is taken as it is.
func outputText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case !present(raw):
		return "", nil
	case raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case raw[0] != '[':
		return "", fmt.Errorf("must be an array of content parts, not %s", JSONKind(raw))
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New(`must be an array of content parts ({"type":"output_text","text":…})`)
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "output_text" || p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// itemError words a decoding error of element i of the array at where.
func itemError(err error, where string, i int, what string) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Errorf("%s[%d] must be an object (%s), not %s", where, i, what, te.Value)
		}
		return fmt.Errorf("%s[%d].%s must be %s, not %s", where, i, te.Field, JSONTypeName(te.Type.Kind()), te.Value)
	}
	return fmt.Errorf("%s[%d]: %w", where, i, err)
}

// ResponsesOutput is a function_call_output item: one call's result in
// the Responses shape. Tooldispatch is left out in the strict shape.
type ResponsesOutput struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	// Output is the result's text (a string) or, when the result carries
	// images, a list of ResponsesOutputItem: its text, then one
	// input_image per image (parts.go).
	Output any `json:"output"`
	// Tooldispatch carries the call's status (and injected fault), which
	// the Responses item has no field for: a documented extra property,
	// absent in ShapeResponsesStrict.
	Tooldispatch *ResponsesStatus `json:"tooldispatch,omitempty"`
}

// ResponsesStatus is the extra object of a ResponsesOutput.
type ResponsesStatus struct {
	Status   string `json:"status"`
	Injected string `json:"injected,omitempty"`
}

// ResponsesResult is m as a function_call_output item, with its status
// unless strict.
func ResponsesResult(m *ToolMessage, strict bool) ResponsesOutput {
	out := ResponsesOutput{Type: "function_call_output", CallID: m.GetToolCallId(), Output: responsesOutput(m)}
	if !strict {
		out.Tooldispatch = &ResponsesStatus{Status: m.GetStatus(), Injected: m.GetInjected()}
	}
	return out
}
