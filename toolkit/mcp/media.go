package mcp

import (
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Media of a result. A tool's images and audio (and embedded resources
// whose blob is an image or a sound) are kept as toolkit.Parts beside the
// result's text, which holds a numbered placeholder for each ("[image 1:
// image/png, 3.9 KiB]"); the reply shapes that carry media hand them to
// the model (messages/parts.go). A server is untrusted, so what is kept is
// bounded and checked: at most maxPartBytes per piece and maxPartsBytes
// per result, a media type that parses (its parameters dropped), and for
// the image types providers take inline, bytes that are what the type
// says. Anything else stays a placeholder saying why it was not kept.
const (
	// maxPartBytes bounds one image or sound kept with a result.
	maxPartBytes = 1 << 20
	// maxPartsBytes bounds the media kept with one result.
	maxPartsBytes = 4 << 20
)

// sniffed are the image types whose bytes are checked against the type
// claimed: the ones providers take inline.
var sniffed = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// media collects a result's parts and numbers their placeholders.
type media struct {
	parts []toolkit.Part
	bytes int
	count map[string]int // kept parts by kind
}

// add keeps data of kind (toolkit.PartImage or PartAudio) with the claimed
// MIME type when it passes the bounds and checks, and returns the
// placeholder for the text; uri names the resource it came from ("" when
// none).
func (m *media) add(kind, claimed string, data []byte, uri string) string {
	from := ""
	if uri != "" {
		from = " from " + uri
	}
	mt, why := m.check(kind, claimed, data)
	if why != "" {
		return fmt.Sprintf("[%s%s: %s, %s; %s; not kept]", kind, from, orUnknown(oneLine(claimed, 100)), sizeText(len(data)), why)
	}
	if m.count == nil {
		m.count = map[string]int{}
	}
	m.count[kind]++
	m.bytes += len(data)
	m.parts = append(m.parts, toolkit.Part{Kind: kind, MIMEType: mt, Data: data, URI: uri})
	return fmt.Sprintf("[%s %d%s: %s, %s]", kind, m.count[kind], from, mt, sizeText(len(data)))
}

// check returns the media type to keep data under, or why it is not kept.
func (m *media) check(kind, claimed string, data []byte) (string, string) {
	mt, _, err := mime.ParseMediaType(claimed)
	switch {
	case err != nil || !strings.HasPrefix(mt, kind+"/"):
		return "", fmt.Sprintf("not a valid %s type", kind)
	case len(data) == 0:
		return "", "empty"
	case len(data) > maxPartBytes:
		return "", fmt.Sprintf("over the %s a result's %s may have", sizeText(maxPartBytes), kind)
	case m.bytes+len(data) > maxPartsBytes:
		return "", fmt.Sprintf("over the %s of media a result may have", sizeText(maxPartsBytes))
	case sniffed[mt] && http.DetectContentType(data) != mt:
		return "", fmt.Sprintf("its bytes are not %s", mt)
	}
	return mt, ""
}
