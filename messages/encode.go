package messages

import "time"

// OpenAIToolMessage is a tool message in the OpenAI shape with the call's
// name and status: what run prints and the service answers by default,
// and what a session reads back as.
type OpenAIToolMessage struct {
	Role       string `json:"role"`
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
	Status     string `json:"status"`
	Content    string `json:"content"`
	Injected   string `json:"injected,omitempty"`
	// Parts are the media the tool returned beside its text, as stored
	// (parts.go).
	Parts []PartJSON `json:"parts,omitempty"`
}

// StrictOpenAIToolMessage is a tool message with the properties of the
// OpenAI chat-completions reference and nothing else.
type StrictOpenAIToolMessage struct {
	Role       string `json:"role"`
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
}

// OpenAIAssistantMessage is an assistant message in the OpenAI shape, as a
// session reads back.
type OpenAIAssistantMessage struct {
	Role      string               `json:"role"`
	Content   string               `json:"content"`
	ToolCalls []OpenAIToolCallJSON `json:"tool_calls,omitempty"`
}

// OpenAIToolCallJSON is one call of an OpenAIAssistantMessage.
type OpenAIToolCallJSON struct {
	ID       string             `json:"id"`
	Type     string             `json:"type"`
	Function OpenAIFunctionJSON `json:"function"`
}

// OpenAIFunctionJSON is the function part of an OpenAIToolCallJSON; its
// arguments are a JSON string.
type OpenAIFunctionJSON struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// EventJSON is an event as JSON: a line of run's output, the data of a
// server-sent event.
type EventJSON struct {
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
	// Diff, Note and StateHash preview a tool_confirm of a call that
	// changes workspace files (see Event).
	Diff      string `json:"diff,omitempty"`
	Note      string `json:"note,omitempty"`
	StateHash string `json:"state_hash,omitempty"`
	// TurnText and Upcoming show a tool_confirm with its turn: the model's
	// own text of the turn, and the calls after it not checked yet.
	TurnText string             `json:"turn_text,omitempty"`
	Upcoming []UpcomingCallJSON `json:"upcoming,omitempty"`
	// ApproveAsked and ApproveApplied tell, on a policy_lowered event, the
	// approval the turn asked for and the lower one it got.
	ApproveAsked   string `json:"approve_asked,omitempty"`
	ApproveApplied string `json:"approve_applied,omitempty"`
}

// UpcomingCallJSON is an UpcomingCall as JSON.
type UpcomingCallJSON struct {
	CallID    string `json:"call_id"`
	Tool      string `json:"tool"`
	Arguments string `json:"arguments,omitempty"`
	Asks      bool   `json:"asks"`
}

// ToolMessageJSON is m in the OpenAI shape with name and status.
func ToolMessageJSON(m *ToolMessage) OpenAIToolMessage {
	return OpenAIToolMessage{Role: toolRole(m), ToolCallID: m.GetToolCallId(), Name: m.GetName(),
		Status: m.GetStatus(), Content: m.GetContent(), Injected: m.GetInjected(), Parts: partsJSON(m.GetParts())}
}

// StrictToolMessageJSON is m with role, tool_call_id and content only; the
// content says what media it leaves out.
func StrictToolMessageJSON(m *ToolMessage) StrictOpenAIToolMessage {
	return StrictOpenAIToolMessage{Role: toolRole(m), ToolCallID: m.GetToolCallId(), Content: strictContent(m)}
}

func toolRole(m *ToolMessage) string {
	if r := m.GetRole(); r != "" {
		return r
	}
	return "tool"
}

// ResultJSON is one call's result in shape s: a tool message, for
// ShapeAnthropic a tool_result block, for the Responses shapes a
// function_call_output item, for ShapeGemini a functionResponse part.
func ResultJSON(m *ToolMessage, s Shape) any {
	switch s {
	case ShapeOpenAIStrict:
		return StrictToolMessageJSON(m)
	case ShapeAnthropic:
		return AnthropicResult(m)
	case ShapeResponses, ShapeResponsesStrict:
		return ResponsesResult(m, s == ShapeResponsesStrict)
	case ShapeGemini:
		return GeminiResult(m, "")
	}
	return ToolMessageJSON(m)
}

// Reply is the conversation messages that hand a turn's results back in
// shape s, in call order: one tool message per call in the OpenAI shapes,
// one function_call_output item per call in the Responses shapes, one user
// message of tool_result blocks in Anthropic's, one user content of
// functionResponse parts in Gemini's (none when the turn had no calls).
// ReplyTo names Gemini's responses as the model named its calls.
func Reply(ms []*ToolMessage, s Shape) []any { return ReplyTo(nil, ms, s) }

// ReplyTo is Reply for the results ms of the calls of msg: a Gemini
// functionResponse carries the name the model gave the call (a call
// through run_tool is answered as run_tool, a name with leaked tokens as
// sent), so Gemini pairs it. With a nil msg the results' own names are used.
func ReplyTo(msg *AssistantMessage, ms []*ToolMessage, s Shape) []any {
	switch s {
	case ShapeAnthropic:
		if len(ms) == 0 {
			return []any{}
		}
		return []any{AnthropicReply(ms)}
	case ShapeGemini:
		if len(ms) == 0 {
			return []any{}
		}
		var names []string
		if calls := msg.GetToolCalls(); len(calls) == len(ms) {
			names = make([]string, len(calls))
			for i, c := range calls {
				names[i] = c.GetFunction().GetName()
			}
		}
		return []any{GeminiReply(ms, names)}
	}
	out := make([]any, len(ms))
	for i, m := range ms {
		out[i] = ResultJSON(m, s)
	}
	return out
}

// AssistantJSON is m in the OpenAI shape.
func AssistantJSON(m *AssistantMessage) OpenAIAssistantMessage {
	out := OpenAIAssistantMessage{Role: m.GetRole(), Content: m.GetContent()}
	if out.Role == "" {
		out.Role = "assistant"
	}
	for _, c := range m.GetToolCalls() {
		out.ToolCalls = append(out.ToolCalls, OpenAIToolCallJSON{ID: c.GetId(), Type: c.GetType(),
			Function: OpenAIFunctionJSON{Name: c.GetFunction().GetName(), Arguments: c.GetFunction().GetArguments()}})
	}
	return out
}

// EventToJSON is ev as JSON, its time in RFC 3339 with nanoseconds (UTC).
func EventToJSON(ev *Event) EventJSON {
	d := EventJSON{
		Event: ev.GetKind(), Session: ev.GetSession(), Run: ev.GetRun(), Turn: ev.GetTurn(),
		CallID: ev.GetCallId(), Tool: ev.GetTool(), Seq: ev.GetSeq(),
		Text: ev.GetText(), Status: ev.GetStatus(), ArgsHash: ev.GetArgsHash(),
		Arguments: ev.GetArguments(), Injected: ev.GetInjected(),
		Diff: ev.GetDiff(), Note: ev.GetNote(), StateHash: ev.GetStateHash(),
		TurnText: ev.GetTurnText(), ApproveAsked: ev.GetApproveAsked(), ApproveApplied: ev.GetApproveApplied(),
	}
	for _, u := range ev.GetUpcoming() {
		d.Upcoming = append(d.Upcoming, UpcomingCallJSON{CallID: u.GetCallId(), Tool: u.GetTool(), Arguments: u.GetArguments(), Asks: u.GetAsks()})
	}
	if ns := ev.GetTimeUnixNano(); ns != 0 {
		d.Time = time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
	}
	return d
}
