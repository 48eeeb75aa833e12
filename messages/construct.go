package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Constructors for the shapes an embedder builds most, so a turn rarely
// needs nested struct literals of the generated types.

// NewCall returns one tool call of a turn. args are the call's arguments:
// nil for none; a string, []byte or json.RawMessage as the JSON text the
// model sent (kept as it is, so the dispatcher's strict parser judges it);
// anything else (a map, a struct) is encoded as JSON. Arguments that cannot
// be encoded are replaced by a text the dispatcher refuses for that call
// alone (invalid_args).
func NewCall(id, name string, args any) *ToolCall {
	var text string
	switch v := args.(type) {
	case nil:
	case string:
		text = v
	case []byte:
		text = string(v)
	case json.RawMessage:
		text = string(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			text = `"the arguments could not be encoded as JSON"`
		} else {
			text = string(b)
		}
	}
	return &ToolCall{Id: id, Type: "function", Function: &FunctionCall{Name: name, Arguments: text}}
}

// NewTurn returns the assistant message of a turn that carries calls.
func NewTurn(calls ...*ToolCall) *AssistantMessage {
	return &AssistantMessage{Role: "assistant", ToolCalls: calls}
}

// TurnFromOpenAI reads the assistant message of a turn from OpenAI
// chat-completions JSON: either the message itself
// ({"role":"assistant","content":…,"tool_calls":[…]}) or a whole
// chat-completion response, whose first choice's message is taken. Content
// may be a string, null or content parts; each call's arguments a JSON
// string or, leniently, the object itself. Unknown fields are ignored.
func TurnFromOpenAI(b []byte) (*AssistantMessage, error) {
	var m struct {
		Role      string           `json:"role"`
		Content   json.RawMessage  `json:"content"`
		ToolCalls []OpenAIToolCall `json:"tool_calls"`
		Choices   []struct {
			Message json.RawMessage `json:"message"`
		} `json:"choices"`
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("messages: an OpenAI assistant message is a JSON object, not %s", JSONKind(b))
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("messages: reading an OpenAI assistant message: %w", err)
	}
	if m.Choices != nil {
		if len(m.Choices) == 0 || len(m.Choices[0].Message) == 0 {
			return nil, errors.New("messages: the chat completion has no choices[0].message")
		}
		return TurnFromOpenAI(m.Choices[0].Message)
	}
	msg, err := AssistantFromOpenAI(m.Role, m.Content, m.ToolCalls, "")
	if err != nil {
		return nil, fmt.Errorf("messages: %w", err)
	}
	return msg, nil
}
