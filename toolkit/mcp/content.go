package mcp

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// ToolError is a tool result the server flagged with isError: the tool ran
// and failed. Its text is what the server said.
type ToolError struct {
	Server string
	Tool   string
	Text   string
}

// Error returns the server's text.
func (e *ToolError) Error() string {
	if strings.TrimSpace(e.Text) == "" {
		return fmt.Sprintf("tool %s of MCP server %q reported an error without a message", e.Tool, e.Server)
	}
	return e.Text
}

// resultText renders a tool result as text (joinResult) with its
// structured content as it is, cut at limit bytes with a note.
func resultText(res *mcp.CallToolResult, limit int) string {
	var structured string
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			structured = string(b)
		}
	}
	text, _ := joinResult(res, structured)
	return capText(text, limit)
}

// joinResult renders a tool result: its text for the model and its media
// (media.go). The text is structured (the structured content as JSON,
// checked) first, then the blocks, a text block that only repeats the
// structured content left out: text blocks as they are, every other block
// as a one-line summary, an image or a sound kept as a part as its
// numbered placeholder.
func joinResult(res *mcp.CallToolResult, structured string) (string, []toolkit.Part) {
	parts := make([]string, 0, len(res.Content)+1)
	if structured != "" {
		parts = append(parts, structured)
	}
	var m media
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok && structured != "" && repeats(t.Text, structured) {
			continue
		}
		parts = append(parts, blockText(c, &m))
	}
	return strings.Join(parts, "\n"), m.parts
}

// blockText is the text of one content block; media it keeps go to m.
// A resource keeps its URI and MIME type in the text.
func blockText(c mcp.Content, m *media) string {
	switch c := c.(type) {
	case *mcp.TextContent:
		return c.Text
	case *mcp.ImageContent:
		return m.add(toolkit.PartImage, c.MIMEType, c.Data, "")
	case *mcp.AudioContent:
		return m.add(toolkit.PartAudio, c.MIMEType, c.Data, "")
	case *mcp.ResourceLink:
		s := "[resource link: " + c.URI
		if c.Name != "" {
			s += " (" + c.Name + ")"
		}
		if c.MIMEType != "" {
			s += ", " + c.MIMEType
		}
		if c.Description != "" {
			s += ": " + c.Description
		}
		return s + "]"
	case *mcp.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return "[embedded resource without contents]"
		}
		if r.Blob != nil {
			for _, kind := range []string{toolkit.PartImage, toolkit.PartAudio} {
				if strings.HasPrefix(strings.ToLower(r.MIMEType), kind+"/") {
					return m.add(kind, r.MIMEType, r.Blob, r.URI)
				}
			}
			return fmt.Sprintf("[embedded resource %s: %s, %s of binary data; not shown]", r.URI, orUnknown(r.MIMEType), sizeText(len(r.Blob)))
		}
		if r.MIMEType != "" {
			return fmt.Sprintf("[embedded resource %s, %s]\n%s", r.URI, r.MIMEType, r.Text)
		}
		return fmt.Sprintf("[embedded resource %s]\n%s", r.URI, r.Text)
	case nil:
		return ""
	}
	return fmt.Sprintf("[%s content; not shown]", strings.TrimPrefix(fmt.Sprintf("%T", c), "*mcp."))
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}

// sizeText renders a byte count for people.
func sizeText(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// capText cuts s to at most limit bytes (on a character boundary, outside
// redaction markers) and says so; invalid UTF-8 is replaced.
func capText(s string, limit int) string {
	return capWith(s, limit, "\n[… result cut at %s of %s …]")
}

// capWith cuts s to at most limit bytes (on a character boundary) and
// appends note, formatted with the sizes kept and whole; invalid UTF-8 is
// replaced.
func capWith(s string, limit int, note string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= limit {
		return s
	}
	cut := toolkit.SafeCut(s, limit)
	return s[:cut] + fmt.Sprintf(note, sizeText(cut), sizeText(len(s)))
}
