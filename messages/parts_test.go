package messages

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// media is a tool result's text and parts.
type media struct {
	text  string
	parts []*ContentPart
}

var (
	png  = &ContentPart{Kind: PartImage, MimeType: "image/png", Data: []byte("\x89PNG...")}
	gif  = &ContentPart{Kind: PartImage, MimeType: "image/gif", Data: []byte("GIF89a"), Uri: "demo://gif"}
	svg  = &ContentPart{Kind: PartImage, MimeType: "image/svg+xml", Data: []byte("<svg/>")}
	wav  = &ContentPart{Kind: PartAudio, MimeType: "audio/wav", Data: []byte("RIFF")}
	b64  = func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	note = func(where, left string) string { return "[not shown: " + left + "; " + where + " cannot carry them]" }
)

// mediaCases are results with media of every kind.
func mediaCases() []media {
	return []media{
		{"here: [image 1: image/png, 7 bytes]", []*ContentPart{png}},
		{"", []*ContentPart{png, gif}},
		{"[image 1] [image 2] [audio 1]", []*ContentPart{svg, png, wav}},
		{"only sound [audio 1]", []*ContentPart{wav}},
	}
}

// TestMediaInEveryShape: each shape hands over the media its provider's
// tool result can carry, after the text, and says in the text which it
// cannot; the default OpenAI message carries them all as stored.
func TestMediaInEveryShape(t *testing.T) {
	m := &ToolMessage{ToolCallId: "c1", Name: "mcp__img__draw", Status: "ok", Content: "drawn", Parts: []*ContentPart{svg, png, gif, wav}}
	asJSON := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// plain is v's JSON decoded, for comparing shapes whatever the order
	// of their fields.
	plain := func(v any) any {
		var out any
		if err := json.Unmarshal([]byte(asJSON(v)), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}

	t.Run("anthropic", func(t *testing.T) {
		got := plain(AnthropicResult(m))
		want := plain(map[string]any{"type": "tool_result", "tool_use_id": "c1", "content": []any{
			map[string]any{"type": "text", "text": "drawn\n" + note("an Anthropic tool_result", "image 1 (image/svg+xml), audio 1 (audio/wav)")},
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": b64(png.Data)}},
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/gif", "data": b64(gif.Data)}},
		}})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("responses", func(t *testing.T) {
		got := plain(ResponsesResult(m, true))
		want := plain(map[string]any{"type": "function_call_output", "call_id": "c1", "output": []any{
			map[string]any{"type": "input_text", "text": "drawn\n" + note("a function_call_output", "image 1 (image/svg+xml), audio 1 (audio/wav)")},
			map[string]any{"type": "input_image", "image_url": "data:image/png;base64," + b64(png.Data)},
			map[string]any{"type": "input_image", "image_url": "data:image/gif;base64," + b64(gif.Data)},
		}})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("gemini", func(t *testing.T) {
		got := plain(GeminiResult(m, ""))
		want := plain(map[string]any{"functionResponse": map[string]any{"id": "c1", "name": "mcp__img__draw",
			"response": map[string]any{"output": "drawn\n" + note("a Gemini functionResponse", "image 1 (image/svg+xml), image 3 (image/gif), audio 1 (audio/wav)")},
			"parts":    []any{map[string]any{"inlineData": map[string]any{"mimeType": "image/png", "data": b64(png.Data)}}}}})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("openai-strict", func(t *testing.T) {
		got := StrictToolMessageJSON(m).Content
		want := "drawn\n" + note("an OpenAI chat-completions tool message", "image 1 (image/svg+xml), image 2 (image/png), image 3 (image/gif), audio 1 (audio/wav)")
		if got != want {
			t.Errorf("content = %q, want %q", got, want)
		}
	})
	t.Run("openai", func(t *testing.T) {
		got := ToolMessageJSON(m)
		if got.Content != "drawn" || len(got.Parts) != 4 || got.Parts[2] != (PartJSON{Kind: "image", MIMEType: "image/gif", Data: b64(gif.Data), URI: "demo://gif"}) {
			t.Errorf("default message = %+v; want the stored content and every part", got)
		}
	})
	t.Run("no media", func(t *testing.T) {
		plain := &ToolMessage{ToolCallId: "c2", Status: "ok", Content: "just text"}
		if c := AnthropicResult(plain).Content; c != "just text" {
			t.Errorf("anthropic content = %v, want the text as a string", c)
		}
		if o := ResponsesResult(plain, false).Output; o != "just text" {
			t.Errorf("responses output = %v, want the text as a string", o)
		}
		if p := GeminiResult(plain, "").FunctionResponse.Parts; p != nil {
			t.Errorf("gemini parts = %v, want none", p)
		}
		if strings.Contains(asJSON(ToolMessageJSON(plain)), "parts") {
			t.Errorf("a message without media has parts: %s", asJSON(ToolMessageJSON(plain)))
		}
	})
	t.Run("images without text", func(t *testing.T) {
		bare := &ToolMessage{ToolCallId: "c3", Status: "ok", Parts: []*ContentPart{png}}
		blocks, ok := AnthropicResult(bare).Content.([]AnthropicBlock)
		if !ok || len(blocks) != 1 || blocks[0].Type != "image" {
			t.Errorf("anthropic content = %#v; want one image block and no empty text block", AnthropicResult(bare).Content)
		}
	})
}
