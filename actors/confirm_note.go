package actors

import (
	"strings"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// withToolNote adds what the tool itself asks to show with every
// confirmation (toolkit.Tool.ConfirmNote, such as a trusted MCP server's
// destructiveHint) to a preview's note.
func withToolNote(note string, tool *toolkit.Tool) string {
	if tool == nil || tool.ConfirmNote == "" {
		return note
	}
	if note == "" {
		return tool.ConfirmNote
	}
	return strings.TrimRight(note, "\n") + "\n" + tool.ConfirmNote
}
