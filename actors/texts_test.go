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
		text := clip("x"+strings.Repeat("é€😀", maxEventText), n)
		if !utf8.ValidString(text) {
			t.Errorf("clip(…, %d) is not valid UTF-8", n)
		}
		if len(text) > n+len("…") {
			t.Errorf("clip(…, %d) is %d bytes", n, len(text))
		}
		ev := &messages.Event{Kind: EventToolResult, Text: text, Arguments: clip(`{"q":"`+strings.Repeat("ü", 5000), 4096)}
		if _, err := proto.Marshal(ev); err != nil {
			t.Errorf("clip(…, %d): proto.Marshal: %v", n, err)
		}
	}
	if got := clip("short", 80); got != "short" {
		t.Errorf("clip(short) = %q", got)
	}
}
