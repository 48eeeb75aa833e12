package actors

import (
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// withParts attaches a result's media to its tool message, so that they
// are committed with it (ToolMessage.parts) and reach the reply shapes
// that carry media.
func withParts(m *messages.ToolMessage, parts []toolkit.Part) *messages.ToolMessage {
	if len(parts) == 0 {
		return m
	}
	m.Parts = make([]*messages.ContentPart, len(parts))
	for i, p := range parts {
		m.Parts[i] = &messages.ContentPart{Kind: p.Kind, MimeType: p.MIMEType, Data: p.Data, Uri: p.URI}
	}
	return m
}
