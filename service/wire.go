package service

import (
	"encoding/json"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Wire shapes of requests. Decoding rejects unknown fields, except inside
// the message: it is decoded apart by the messages codec, which ignores
// the fields of an assistant message the dispatcher has no use for
// (OpenRouter's reasoning_details, refusal, annotations…), so a model's
// reply can be posted as it came.
type (
	turnRequest struct {
		Run             string                 `json:"run"`
		Provider        string                 `json:"provider"`
		Message         json.RawMessage        `json:"message"`
		ClientTools     *[]messages.ClientTool `json:"client_tools"`
		TurnID          string                 `json:"turn_id"`
		Approve         string                 `json:"approve"`
		Exclude         *[]string              `json:"exclude"`
		AutoLoadSchemas *bool                  `json:"auto_load_schemas"`
		Chaos           json.RawMessage        `json:"chaos"`
		// Confirm is how a call that needs approval waits: "block" (the
		// turn waits for the answer) or "defer" (the call is committed
		// awaiting_approval and the turn returns at once); absent, the
		// operator's default.
		Confirm string `json:"confirm"`
		// Format is the message's shape: "openai", "anthropic",
		// "responses", "gemini", or absent to detect it (an array:
		// responses; parts: gemini; tool_use blocks in the content:
		// anthropic).
		Format string `json:"format"`
		// Reply is the shape of OpenAI results (chat completions and
		// Responses): "openai" (default, with statuses) or
		// "openai-strict".
		Reply string `json:"reply"`
		// ToolsFormat is the format of the tools array the model was
		// given (openai, openai-strict, responses, anthropic, gemini);
		// absent, the message's format.
		ToolsFormat string `json:"tools_format"`
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
		// Content answers a request for input from an MCP server
		// (elicitation) with the object of the requested fields, in
		// place of text holding it as JSON.
		Content json.RawMessage `json:"content"`
		// Declined declines the question instead of answering it.
		Declined bool `json:"declined"`
	}
	clientResultRequest struct {
		Content *string `json:"content"`
		IsError bool    `json:"is_error"`
		// Format and Reply choose the shape of the committed result the
		// answer carries, as for a turn: "format":"anthropic" answers
		// with a tool_result block.
		Format string `json:"format"`
		Reply  string `json:"reply"`
	}
)

// Wire shapes of replies: the messages codec's (messages/encode.go).
type (
	// turnReplyOf is the reply to a turn; M is the shape of its messages
	// (any when encoding, toolMessage when a client reads the default).
	turnReplyOf[M any] struct {
		Turn     int64 `json:"turn"`
		Messages []M   `json:"messages"`
		Replayed bool  `json:"replayed,omitempty"`
		// Member is the cluster member that ran the turn (cluster mode only).
		Member string `json:"member,omitempty"`
	}
	turnReply   = turnReplyOf[toolMessage]
	turnFailure struct {
		Error string `json:"error"`
		// Code is the status code, in the error event of a streamed turn.
		Code     int   `json:"code,omitempty"`
		Turn     int64 `json:"turn,omitempty"`
		Messages []any `json:"messages,omitempty"`
	}
	// clientResultReply answers an accepted client result with the tool
	// message committed.
	clientResultReply struct {
		Status  string `json:"status"`
		Message any    `json:"message,omitempty"`
	}
	toolMessage      = messages.OpenAIToolMessage
	assistantMessage = messages.OpenAIAssistantMessage
	eventData        = messages.EventJSON
	sessionReply     struct {
		Tools         []toolMessage `json:"tools"`
		ToolHistories []any         `json:"tool_histories"`
	}
)

// sessionJSON is a session as GET /v1/sessions/{session} returns it: the
// tool messages in order, and per turn its assistant message followed by
// its tool messages.
func sessionJSON(turns []*messages.TurnRecord) sessionReply {
	out := sessionReply{Tools: []toolMessage{}, ToolHistories: []any{}}
	for _, t := range turns {
		out.ToolHistories = append(out.ToolHistories, messages.AssistantJSON(t.GetAssistant()))
		for _, m := range t.GetToolMessages() {
			tm := messages.ToolMessageJSON(m)
			out.Tools = append(out.Tools, tm)
			out.ToolHistories = append(out.ToolHistories, tm)
		}
	}
	return out
}

func eventJSON(ev *messages.Event) eventData { return messages.EventToJSON(ev) }
