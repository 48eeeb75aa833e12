package service

import (
	"encoding/json"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Wire shapes of requests. Decoding rejects unknown fields; the message
// accepts the fields of an OpenAI assistant message the dispatcher has no
// use for, so a model's reply can be posted as it came.
type (
	turnRequest struct {
		Run             string                         `json:"run"`
		Provider        string                         `json:"provider"`
		Message         *wireMessage                   `json:"message"`
		ClientTools     *[]messages.OpenAIFunctionTool `json:"client_tools"`
		TurnID          string                         `json:"turn_id"`
		Approve         string                         `json:"approve"`
		Exclude         *[]string                      `json:"exclude"`
		AutoLoadSchemas *bool                          `json:"auto_load_schemas"`
		Chaos           json.RawMessage                `json:"chaos"`
	}
	wireMessage struct {
		Role      string                    `json:"role"`
		Content   json.RawMessage           `json:"content"`
		ToolCalls []messages.OpenAIToolCall `json:"tool_calls"`
		// Accepted and not used.
		Name             json.RawMessage `json:"name"`
		Refusal          json.RawMessage `json:"refusal"`
		Annotations      json.RawMessage `json:"annotations"`
		Audio            json.RawMessage `json:"audio"`
		FunctionCall     json.RawMessage `json:"function_call"`
		ReasoningContent json.RawMessage `json:"reasoning_content"`
	}

	confirmRequest struct {
		Approve  *bool  `json:"approve"`
		Reason   string `json:"reason"`
		ArgsHash string `json:"args_hash"`
	}
	answerRequest struct {
		Text *string `json:"text"`
		// Origins narrows a store_secret answer to these of the origins
		// asked about; empty keeps them all.
		Origins []string `json:"origins"`
	}
	clientResultRequest struct {
		Content *string `json:"content"`
		IsError bool    `json:"is_error"`
	}
)

// Wire shapes of replies.
type (
	turnReply struct {
		Turn     int64         `json:"turn"`
		Messages []toolMessage `json:"messages"`
		Replayed bool          `json:"replayed,omitempty"`
		// Member is the cluster member that ran the turn (cluster mode only).
		Member string `json:"member,omitempty"`
	}
	turnFailure struct {
		Error string `json:"error"`
		// Code is the status code, in the error event of a streamed turn.
		Code     int           `json:"code,omitempty"`
		Turn     int64         `json:"turn,omitempty"`
		Messages []toolMessage `json:"messages,omitempty"`
	}
	toolMessage struct {
		Role       string `json:"role"`
		ToolCallID string `json:"tool_call_id"`
		Name       string `json:"name"`
		Status     string `json:"status"`
		Content    string `json:"content"`
		Injected   string `json:"injected,omitempty"`
	}
	assistantMessage struct {
		Role      string     `json:"role"`
		Content   string     `json:"content"`
		ToolCalls []toolCall `json:"tool_calls,omitempty"`
	}
	toolCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function functionCall `json:"function"`
	}
	functionCall struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	sessionReply struct {
		Tools         []toolMessage `json:"tools"`
		ToolHistories []any         `json:"tool_histories"`
	}
	eventData struct {
		Event     string `json:"event"`
		Session   string `json:"session"`
		Run       string `json:"run,omitempty"`
		Turn      int64  `json:"turn,omitempty"`
		CallID    string `json:"call_id,omitempty"`
		Tool      string `json:"tool,omitempty"`
		Seq       uint64 `json:"seq"`
		Time      string `json:"time,omitempty"`
		Text      string `json:"text,omitempty"`
		Status    string `json:"status,omitempty"`
		ArgsHash  string `json:"args_hash,omitempty"`
		Arguments string `json:"arguments,omitempty"`
		Injected  string `json:"injected,omitempty"`
	}
)

func toolMessageJSON(m *messages.ToolMessage) toolMessage {
	role := m.GetRole()
	if role == "" {
		role = "tool"
	}
	return toolMessage{Role: role, ToolCallID: m.GetToolCallId(), Name: m.GetName(),
		Status: m.GetStatus(), Content: m.GetContent(), Injected: m.GetInjected()}
}

func toolMessagesJSON(ms []*messages.ToolMessage) []toolMessage {
	out := make([]toolMessage, len(ms))
	for i, m := range ms {
		out[i] = toolMessageJSON(m)
	}
	return out
}

func assistantJSON(m *messages.AssistantMessage) assistantMessage {
	out := assistantMessage{Role: m.GetRole(), Content: m.GetContent()}
	if out.Role == "" {
		out.Role = "assistant"
	}
	for _, c := range m.GetToolCalls() {
		out.ToolCalls = append(out.ToolCalls, toolCall{ID: c.GetId(), Type: c.GetType(),
			Function: functionCall{Name: c.GetFunction().GetName(), Arguments: c.GetFunction().GetArguments()}})
	}
	return out
}

// sessionJSON is a session as GET /v1/sessions/{session} returns it: the
// tool messages in order, and per turn its assistant message followed by
// its tool messages.
func sessionJSON(turns []*messages.TurnRecord) sessionReply {
	out := sessionReply{Tools: []toolMessage{}, ToolHistories: []any{}}
	for _, t := range turns {
		out.ToolHistories = append(out.ToolHistories, assistantJSON(t.GetAssistant()))
		for _, m := range t.GetToolMessages() {
			tm := toolMessageJSON(m)
			out.Tools = append(out.Tools, tm)
			out.ToolHistories = append(out.ToolHistories, tm)
		}
	}
	return out
}

func eventJSON(ev *messages.Event) eventData {
	d := eventData{
		Event: ev.GetKind(), Session: ev.GetSession(), Run: ev.GetRun(), Turn: ev.GetTurn(),
		CallID: ev.GetCallId(), Tool: ev.GetTool(), Seq: ev.GetSeq(),
		Text: ev.GetText(), Status: ev.GetStatus(), ArgsHash: ev.GetArgsHash(),
		Arguments: ev.GetArguments(), Injected: ev.GetInjected(),
	}
	if ns := ev.GetTimeUnixNano(); ns != 0 {
		d.Time = time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
	}
	return d
}
