package mcp

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// tinyPNG is a 1×1 PNG.
var tinyPNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

// TestMediaAreKeptWithinBounds: images and sounds of a result (and
// embedded resources holding them) are kept as parts, numbered in the
// text, their resource's URI kept; one over maxPartBytes, the media past
// maxPartsBytes, a type that does not parse or is not of its kind, and an
// image whose bytes are not the type it claims stay placeholders saying
// why.
func TestMediaAreKeptWithinBounds(t *testing.T) {
	big := append(bytes.Clone(tinyPNG), make([]byte, maxPartBytes)...)
	almost := append(bytes.Clone(tinyPNG), make([]byte, maxPartBytes-len(tinyPNG))...)
	res := &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: "look:"},
		&mcp.ImageContent{MIMEType: "image/png", Data: tinyPNG},
		&mcp.ImageContent{MIMEType: "image/png", Data: []byte("<script>not a png</script>")},
		&mcp.ImageContent{MIMEType: "image/png", Data: big},
		&mcp.ImageContent{MIMEType: "image/png,data:x", Data: tinyPNG},
		&mcp.ImageContent{MIMEType: "text/html", Data: tinyPNG},
		&mcp.AudioContent{MIMEType: "audio/wav; rate=8000", Data: []byte("RIFF....WAVE")},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "demo://logo", MIMEType: "image/png", Blob: tinyPNG}},
		&mcp.ImageContent{MIMEType: "image/png", Data: almost},
		&mcp.ImageContent{MIMEType: "image/png", Data: almost},
		&mcp.ImageContent{MIMEType: "image/png", Data: almost},
		&mcp.ImageContent{MIMEType: "image/png", Data: almost},
	}}
	text, parts := joinResult(res, "")
	want := strings.Join([]string{
		"look:",
		"[image 1: image/png, 70 bytes]",
		"[image: image/png, 26 bytes; its bytes are not image/png; not kept]",
		"[image: image/png, 1.0 MiB; over the 1.0 MiB a result's image may have; not kept]",
		"[image: image/png,data:x, 70 bytes; not a valid image type; not kept]",
		"[image: text/html, 70 bytes; not a valid image type; not kept]",
		"[audio 1: audio/wav, 12 bytes]",
		"[image 2 from demo://logo: image/png, 70 bytes]",
		"[image 3: image/png, 1.0 MiB]",
		"[image 4: image/png, 1.0 MiB]",
		"[image 5: image/png, 1.0 MiB]",
		"[image: image/png, 1.0 MiB; over the 4.0 MiB of media a result may have; not kept]",
	}, "\n")
	if diff := cmp.Diff(want, text); diff != "" {
		t.Errorf("text (-want +got):\n%s", diff)
	}
	var kinds []string
	for _, p := range parts {
		kinds = append(kinds, p.Kind+" "+p.MIMEType+" "+p.URI)
	}
	wantKinds := []string{"image image/png ", "audio audio/wav ", "image image/png demo://logo", "image image/png ", "image image/png ", "image image/png "}
	if diff := cmp.Diff(wantKinds, kinds); diff != "" {
		t.Errorf("parts (-want +got):\n%s", diff)
	}
	if !bytes.Equal(parts[0].Data, tinyPNG) || parts[0].Kind != toolkit.PartImage {
		t.Errorf("the image's bytes are not kept as they are")
	}
}
