package actors

import (
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/messages"
)

// TestClippedEventMarshals: an event whose text was clipped in the middle
// of multi-byte characters still marshals (protobuf strings must be valid
// UTF-8), so it can be relayed to the other cluster members.
func TestClippedEventMarshals(t *testing.T) {
	for _, n := range []int{1, 2, 3, 80, maxEventText} {
		text := messages.ClipText("x"+strings.Repeat("é€😀", maxEventText), n)
		if !utf8.ValidString(text) {
			t.Errorf("messages.ClipText(…, %d) is not valid UTF-8", n)
		}
		if len(text) > n+len("…") {
			t.Errorf("messages.ClipText(…, %d) is %d bytes", n, len(text))
		}
		ev := &messages.Event{Kind: EventToolResult, Text: text, Arguments: messages.ClipText(`{"q":"`+strings.Repeat("ü", 5000), 4096)}
		if _, err := proto.Marshal(ev); err != nil {
			t.Errorf("messages.ClipText(…, %d): proto.Marshal: %v", n, err)
		}
	}
	if got := messages.ClipText("short", 80); got != "short" {
		t.Errorf("messages.ClipText(short) = %q", got)
	}
}
