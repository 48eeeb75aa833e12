package messages

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// Media of a tool result. A tool's images and audio travel with its
// committed tool message as ContentParts (ToolMessage.parts, bytes as they
// are), its text holding a placeholder for each ("[image 1: image/png,
// 3.9 KiB]"), so a session read back has them. Each reply shape hands over
// what its provider's tool result can carry, after the text, and adds a
// note to the text for what it cannot:
//   - Anthropic: image blocks (JPEG, PNG, GIF, WebP) in the tool_result's
//     content (ToolResultBlockParam takes text and image blocks);
//   - OpenAI Responses: input_image items (a data: URL) in the
//     function_call_output's output (a string or a list of input_text,
//     input_image and input_file items);
//   - Gemini: inlineData parts (JPEG, PNG, WebP) of the functionResponse
//     (FunctionResponse.parts);
//   - OpenAI chat completions: a tool message's content is text only, so
//     the strict shape says what it leaves out; the default shape carries
//     the parts as a documented extra property, "parts" (base64), exactly
//     as stored.
// Audio goes to the model in none of them (no provider's tool result
// takes it): a note.

// The kinds of ContentPart.
const (
	PartImage = "image"
	PartAudio = "audio"
)

// Image types each provider's tool result takes inline.
var (
	anthropicImages = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}
	responsesImages = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}
	geminiImages    = map[string]bool{"image/jpeg": true, "image/png": true, "image/webp": true}
)

// PartJSON is a ContentPart as JSON: the "parts" of the default OpenAI
// tool message (what run prints, what a session reads back as). Data is
// base64 (standard, padded).
type PartJSON struct {
	Kind     string `json:"kind"`
	MIMEType string `json:"mime_type"`
	Data     string `json:"data"`
	URI      string `json:"uri,omitempty"`
}

// partsJSON is ps as JSON; nil when there are none.
func partsJSON(ps []*ContentPart) []PartJSON {
	if len(ps) == 0 {
		return nil
	}
	out := make([]PartJSON, len(ps))
	for i, p := range ps {
		out[i] = PartJSON{Kind: p.GetKind(), MIMEType: p.GetMimeType(), Data: base64.StdEncoding.EncodeToString(p.GetData()), URI: p.GetUri()}
	}
	return out
}

// numbered names each part as the text's placeholders do: its kind and
// its number among the parts of that kind ("image 2").
func numbered(ps []*ContentPart) []string {
	n := map[string]int{}
	out := make([]string, len(ps))
	for i, p := range ps {
		n[p.GetKind()]++
		out[i] = fmt.Sprintf("%s %d", p.GetKind(), n[p.GetKind()])
	}
	return out
}

// splitParts returns the parts that are images of a type in takes, and a
// note for the text naming the others (empty when there are none); where
// says what the shape's tool result is.
func splitParts(ps []*ContentPart, takes map[string]bool, where string) (images []*ContentPart, note string) {
	names := numbered(ps)
	var left []string
	for i, p := range ps {
		if p.GetKind() == PartImage && takes[p.GetMimeType()] {
			images = append(images, p)
			continue
		}
		left = append(left, fmt.Sprintf("%s (%s)", names[i], p.GetMimeType()))
	}
	if len(left) > 0 {
		note = fmt.Sprintf("[not shown: %s; %s cannot carry them]", strings.Join(left, ", "), where)
	}
	return images, note
}

// withNote appends note to text on a line of its own.
func withNote(text, note string) string {
	switch {
	case note == "":
		return text
	case text == "":
		return note
	}
	return text + "\n" + note
}

// dataURL is p's bytes as a data: URL.
func dataURL(p *ContentPart) string {
	return "data:" + p.GetMimeType() + ";base64," + base64.StdEncoding.EncodeToString(p.GetData())
}

// AnthropicBlock is a text or image block of a tool_result's content.
type AnthropicBlock struct {
	Type   string             `json:"type"`
	Text   string             `json:"text,omitempty"`
	Source *AnthropicImageSrc `json:"source,omitempty"`
}

// AnthropicImageSrc is an image block's base64 source.
type AnthropicImageSrc struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// anthropicContent is a tool_result's content: the text, or, with images,
// a text block (when there is text) and one image block per image.
func anthropicContent(m *ToolMessage) any {
	images, note := splitParts(m.GetParts(), anthropicImages, "an Anthropic tool_result")
	text := withNote(m.GetContent(), note)
	if len(images) == 0 {
		return text
	}
	blocks := make([]AnthropicBlock, 0, len(images)+1)
	if text != "" {
		blocks = append(blocks, AnthropicBlock{Type: "text", Text: text})
	}
	for _, p := range images {
		blocks = append(blocks, AnthropicBlock{Type: "image", Source: &AnthropicImageSrc{Type: "base64", MediaType: p.GetMimeType(),
			Data: base64.StdEncoding.EncodeToString(p.GetData())}})
	}
	return blocks
}

// ResponsesOutputItem is an input_text or input_image item of a
// function_call_output's output.
type ResponsesOutputItem struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
}

// responsesOutput is a function_call_output's output: the text, or, with
// images, an input_text item (when there is text) and one input_image per
// image.
func responsesOutput(m *ToolMessage) any {
	images, note := splitParts(m.GetParts(), responsesImages, "a function_call_output")
	text := withNote(m.GetContent(), note)
	if len(images) == 0 {
		return text
	}
	items := make([]ResponsesOutputItem, 0, len(images)+1)
	if text != "" {
		items = append(items, ResponsesOutputItem{Type: "input_text", Text: text})
	}
	for _, p := range images {
		items = append(items, ResponsesOutputItem{Type: "input_image", ImageURL: dataURL(p)})
	}
	return items
}

// GeminiResponsePart is a part of a functionResponse: inline media.
type GeminiResponsePart struct {
	InlineData GeminiBlob `json:"inlineData"`
}

// GeminiBlob is inline media of a GeminiResponsePart (data in base64).
type GeminiBlob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

// geminiParts returns the images a functionResponse carries and the note
// for the text.
func geminiParts(m *ToolMessage) ([]GeminiResponsePart, string) {
	images, note := splitParts(m.GetParts(), geminiImages, "a Gemini functionResponse")
	var out []GeminiResponsePart
	for _, p := range images {
		out = append(out, GeminiResponsePart{InlineData: GeminiBlob{MimeType: p.GetMimeType(), Data: base64.StdEncoding.EncodeToString(p.GetData())}})
	}
	return out, note
}

// strictContent is the text of a chat-completions tool message, which
// carries no media: the content and a note for the parts.
func strictContent(m *ToolMessage) string {
	_, note := splitParts(m.GetParts(), nil, "an OpenAI chat-completions tool message")
	return withNote(m.GetContent(), note)
}
