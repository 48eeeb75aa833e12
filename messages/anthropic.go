package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The Anthropic Messages shapes: an assistant message whose content holds
// tool_use blocks comes in; a user message of tool_result blocks goes back.

// anthropicBlock is one content block of an Anthropic assistant message.
// Blocks of other types (thinking, redacted_thinking, server_tool_use…)
// are ignored, and so are fields not listed here.
type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// hasToolUse reports whether content is an array with a tool_use block.
func hasToolUse(content json.RawMessage) bool {
	content = bytes.TrimSpace(content)
	if len(content) == 0 || content[0] != '[' {
		return false
	}
	var blocks []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return false
	}
	for _, b := range blocks {
		if b.Type == "tool_use" {
			return true
		}
	}
	return false
}

// assistantFromAnthropic builds an AssistantMessage from an Anthropic
// assistant message: text blocks joined by newlines, one call per
// tool_use block. Each input keeps its bytes (key order, duplicate keys:
// it is never decoded into a map here), so the dispatcher's strict parser
// refuses what it would refuse in an OpenAI arguments string.
func assistantFromAnthropic(role string, content json.RawMessage, prefix string) (*AssistantMessage, error) {
	if role != "" && role != "assistant" {
		return nil, fmt.Errorf("%srole is %q: a turn is an assistant message", prefix, role)
	}
	out := &AssistantMessage{Role: "assistant"}
	content = bytes.TrimSpace(content)
	switch {
	case len(content) == 0 || string(content) == "null":
		return out, nil
	case content[0] == '"':
		err := json.Unmarshal(content, &out.Content)
		return out, err
	case content[0] != '[':
		return nil, fmt.Errorf("%scontent must be a string or an array of content blocks, not %s", prefix, JSONKind(content))
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(content, &blocks); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, fmt.Errorf("%scontent[].%s must be %s, not %s", prefix, te.Field, JSONTypeName(te.Type.Kind()), te.Value)
		}
		return nil, fmt.Errorf(`%scontent must be an array of content blocks ({"type":"text","text"} or {"type":"tool_use","id","name","input"})`, prefix)
	}
	var texts []string
	for i, b := range blocks {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "tool_use":
			args, err := inputText(b.Input)
			if err != nil {
				return nil, fmt.Errorf("%scontent[%d].input: %w", prefix, i, err)
			}
			out.ToolCalls = append(out.ToolCalls, &ToolCall{Id: b.ID, Type: "function",
				Function: &FunctionCall{Name: b.Name, Arguments: args}})
		}
	}
	out.Content = strings.Join(texts, "\n")
	return out, nil
}

// inputText returns a tool_use input as the JSON text the dispatcher
// parses: compacted with its key order and duplicate keys, null or absent
// as "". A value that is not an object (a string included) stays what it
// is, and the dispatcher refuses that call alone.
func inputText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", err
	}
	return b.String(), nil
}

// toolSpecFromAnthropic converts client_tools[i] in Anthropic's custom
// tool shape.
func toolSpecFromAnthropic(i int, ct ClientTool) (*ToolSpec, error) {
	if ct.Type != "" && ct.Type != "custom" {
		return nil, fmt.Errorf("client_tools[%d].type must be \"custom\" or absent in Anthropic's shape, not %q", i, ct.Type)
	}
	if ct.Name == "" {
		return nil, fmt.Errorf("client_tools[%d].name is empty", i)
	}
	params, err := schemaText(ct.InputSchema, "input_schema", i)
	if err != nil {
		return nil, err
	}
	return &ToolSpec{Name: ct.Name, Description: ct.Description, Parameters: params}, nil
}

// AnthropicToolResult is a tool_result content block. Content is the
// result's text (a string) or, when the result carries images, a list of
// AnthropicBlock: its text, then one image block per image (parts.go).
type AnthropicToolResult struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   any    `json:"content"`
	IsError   bool   `json:"is_error,omitempty"`
}

// AnthropicUserMessage is the user message that carries a turn's results.
type AnthropicUserMessage struct {
	Role    string                `json:"role"`
	Content []AnthropicToolResult `json:"content"`
}

// IsError reports whether a call that ended with status failed, for the
// model: every status but ok, deduped (the copy of a call that succeeded)
// and client_pending (the client runs the call and hands its result back).
func IsError(status string) bool {
	switch status {
	case "ok", "deduped", "client_pending":
		return false
	}
	return true
}

// AnthropicResult is m as a tool_result block.
func AnthropicResult(m *ToolMessage) AnthropicToolResult {
	return AnthropicToolResult{Type: "tool_result", ToolUseID: m.GetToolCallId(), Content: anthropicContent(m), IsError: IsError(m.GetStatus())}
}

// AnthropicReply is the user message carrying ms as tool_result blocks,
// in call order.
func AnthropicReply(ms []*ToolMessage) AnthropicUserMessage {
	out := AnthropicUserMessage{Role: "user", Content: make([]AnthropicToolResult, len(ms))}
	for i, m := range ms {
		out.Content[i] = AnthropicResult(m)
	}
	return out
}
