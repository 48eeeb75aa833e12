package messages

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/integration_test/sdktypes"
)

// statuses are every call status (docs/CONTRACT.md).
var statuses = []string{"ok", "error", "timeout", "canceled", "outcome_unknown", "unknown_tool", "deferred",
	"schema_returned", "invalid_args", "deduped", "skipped", "client_pending", "awaiting_approval"}

// shapeTypes is the SDK type each element of a reply in a shape must have.
// The default shapes are the provider's type plus exactly the extra
// properties the README documents.
var shapeTypes = map[Shape]string{
	ShapeOpenAI:          sdktypes.ChatToolMessage,
	ShapeOpenAIStrict:    sdktypes.ChatToolMessageStrict,
	ShapeAnthropic:       sdktypes.AnthropicUserMessage,
	ShapeResponses:       sdktypes.ResponsesOutput,
	ShapeResponsesStrict: sdktypes.ResponsesOutputStrict,
	ShapeGemini:          sdktypes.GeminiContent,
}

// resultTypes is the SDK type of one result in a shape (ResultJSON, the
// client_result answer).
var resultTypes = map[Shape]string{
	ShapeOpenAI:          shapeTypes[ShapeOpenAI],
	ShapeOpenAIStrict:    shapeTypes[ShapeOpenAIStrict],
	ShapeAnthropic:       sdktypes.AnthropicToolResult,
	ShapeResponses:       shapeTypes[ShapeResponses],
	ShapeResponsesStrict: shapeTypes[ShapeResponsesStrict],
	ShapeGemini:          sdktypes.GeminiPart,
}

// everyStatusTurn is a turn of one call per status, plain and injected,
// with its results.
func everyStatusTurn() (*AssistantMessage, []*ToolMessage) {
	msg := NewTurn()
	var ms []*ToolMessage
	for i, st := range statuses {
		for _, injected := range []string{"", "timeout"} {
			id := fmt.Sprintf("call_%d_%s", i, st)
			if injected != "" {
				id += "_injected"
			}
			msg.ToolCalls = append(msg.ToolCalls, NewCall(id, "read_files", `{"paths":["a"]}`))
			ms = append(ms, &ToolMessage{Role: "tool", ToolCallId: id, Name: "read_files", Status: st,
				Content: "result of " + st + " <&>", Injected: injected})
		}
	}
	// Results with media: every kind a shape takes or leaves out, with
	// and without text, ok and failed.
	for i, parts := range mediaCases() {
		for _, st := range []string{"ok", "error"} {
			id := fmt.Sprintf("call_media_%d_%s", i, st)
			msg.ToolCalls = append(msg.ToolCalls, NewCall(id, "mcp__img__draw", `{}`))
			ms = append(ms, &ToolMessage{Role: "tool", ToolCallId: id, Name: "mcp__img__draw", Status: st,
				Content: parts.text, Parts: parts.parts})
		}
	}
	return msg, ms
}

// replyFile is a TypeScript file declaring every element of the reply of
// (msg, ms) in shape s, and every single result, each typed with its SDK
// type.
func replyFile(msg *AssistantMessage, ms []*ToolMessage, s Shape) string {
	lit := sdktypes.Literal
	if s == ShapeGemini {
		lit = sdktypes.GeminiLiteral
	}
	var b strings.Builder
	name := strings.ReplaceAll(string(s), "-", "_")
	for i, m := range ReplyTo(msg, ms, s) {
		b.WriteString(sdktypes.Declare(fmt.Sprintf("%s_reply_%d", name, i), shapeTypes[s], lit(m)))
	}
	for i, m := range ms {
		b.WriteString(sdktypes.Declare(fmt.Sprintf("%s_result_%d", name, i), resultTypes[s], lit(ResultJSON(m, s))))
	}
	if s == ShapeResponsesStrict {
		// A strict item is an input item of the next request as it is.
		for i, m := range ReplyTo(msg, ms, s) {
			b.WriteString(sdktypes.Declare(fmt.Sprintf("%s_input_%d", name, i), sdktypes.ResponsesInputItem, lit(m)))
		}
	}
	return b.String()
}

// TestRepliesTypeCheckAgainstSDKs: every reply shape the codec emits,
// with every status (plain and injected by chaos mode), strict and
// default, as typed literals of the providers' own SDK types, passes
// tsc --noEmit --strict.
func TestRepliesTypeCheckAgainstSDKs(t *testing.T) {
	msg, ms := everyStatusTurn()
	files := map[string]string{}
	for s := range shapeTypes {
		files[string(s)+".ts"] = replyFile(msg, ms, s)
	}
	if out, err := sdktypes.Check(t, files); err != nil {
		t.Fatalf("the codec's replies do not type-check against the SDKs: %v", err)
	} else if strings.TrimSpace(out) != "" {
		t.Logf("tsc: %s", out)
	}
}

// TestSDKTypeCheckCatchesAWrongField: the check is not vacuous. A reply
// with a field its provider's type does not have, or of the wrong type,
// fails, and tsc says what is wrong.
func TestSDKTypeCheckCatchesAWrongField(t *testing.T) {
	m := &ToolMessage{ToolCallId: "c1", Name: "read_files", Status: "ok", Content: "x"}
	wrong := map[string]struct{ src, want string }{
		// The chat-completions default shape declared strict: name and
		// status are excess properties of ChatCompletionToolMessageParam.
		"openai.ts": {sdktypes.Declare("m", shapeTypes[ShapeOpenAIStrict], sdktypes.Literal(ToolMessageJSON(m))),
			`'"name"' does not exist in type 'ChatCompletionToolMessageParam'`},
		// A Responses item whose status were ours: the SDK's status is
		// in_progress, completed or incomplete.
		"responses.ts": {sdktypes.Declare("m", shapeTypes[ShapeResponses],
			strings.Replace(sdktypes.Literal(ResponsesResult(m, false)), `"type"`, `"status": "ok", "type"`, 1)),
			`Type '"ok"' is not assignable to type '"completed" | "in_progress" | "incomplete"`},
		// An image Anthropic does not take inline: the codec leaves SVG
		// out (a note), and the SDK's type says why.
		"anthropic.ts": {sdktypes.Declare("m", resultTypes[ShapeAnthropic],
			strings.Replace(sdktypes.Literal(AnthropicResult(&ToolMessage{ToolCallId: "c1", Status: "ok", Parts: []*ContentPart{png}})),
				`"image/png"`, `"image/svg+xml"`, 1)),
			`Type '"image/svg+xml"' is not assignable to type`},
		// A Gemini response that is a string, not an object.
		"gemini.ts": {sdktypes.Declare("m", shapeTypes[ShapeGemini],
			strings.Replace(sdktypes.GeminiLiteral(GeminiReply([]*ToolMessage{m}, nil)), `"response": {`, `"response": "x", "was": {`, 1)),
			"Type 'string' is not assignable to type 'Record<string, unknown>'"},
	}
	for name, w := range wrong {
		t.Run(name, func(t *testing.T) {
			out, err := sdktypes.Check(t, map[string]string{name: w.src})
			if !errors.Is(err, sdktypes.ErrTypes) {
				t.Fatalf("a wrong field type-checked (%v):\n%s", err, w.src)
			}
			if !strings.Contains(out, w.want) {
				t.Errorf("tsc does not say %q:\n%s", w.want, out)
			}
		})
	}
}
