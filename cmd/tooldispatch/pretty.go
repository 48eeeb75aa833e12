package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tooldispatch/tooldispatch/messages"
)

// autoBool is a boolean flag that may be left unset: --pretty is on when
// stdout is a terminal unless it is given.
type autoBool struct {
	set, value bool
}

func (a *autoBool) IsBoolFlag() bool { return true }

func (a *autoBool) String() string {
	if a == nil || !a.set {
		return "auto"
	}
	return strconv.FormatBool(a.value)
}

func (a *autoBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	a.set, a.value = true, v
	return nil
}

// or returns the flag's value, or def when it was not given.
func (a *autoBool) or(def bool) bool {
	if a.set {
		return a.value
	}
	return def
}

// prettyContentMax is the most of a result's first line a pretty line
// shows, in runes.
const prettyContentMax = 160

// prettyResult is one result as --pretty prints it: turn, call id, tool,
// status and the first line of the content, on one line.
func prettyResult(turn int64, m *messages.ToolMessage) string {
	status := m.GetStatus()
	if inj := m.GetInjected(); inj != "" {
		status += " (injected " + inj + ")"
	}
	return fmt.Sprintf("%-3d %-12s %-16s %-14s %s\n", turn, oneLine(m.GetToolCallId(), 64), oneLine(m.GetName(), 64),
		oneLine(status, 64), oneLine(m.GetContent(), prettyContentMax))
}

// prettyEvent is one event as --pretty prints it: indented, with its kind, call and tool, status and the first line of its
// text.
func prettyEvent(ev *messages.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "    %-15s", oneLine(ev.GetKind(), 32))
	if ev.GetCallId() != "" || ev.GetTool() != "" {
		fmt.Fprintf(&b, " %s %s", oneLine(ev.GetCallId(), 64), oneLine(ev.GetTool(), 64))
	}
	if s := ev.GetStatus(); s != "" {
		b.WriteString(" " + oneLine(s, 32))
	}
	if s := ev.GetInjected(); s != "" {
		b.WriteString(" injected=" + oneLine(s, 32))
	}
	if s := oneLine(ev.GetText(), prettyContentMax); s != "" {
		b.WriteString(": " + s)
	}
	b.WriteString("\n")
	return b.String()
}

// oneLine returns the first non-empty line of s, at most max runes, with
// control characters (escape sequences included) shown as U+FFFD, so
// nothing a tool returns can move the cursor or recolour the terminal.
func oneLine(s string, max int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == max {
			b.WriteString("…")
			break
		}
		switch {
		case r == '\t':
			r = ' '
		case r == utf8.RuneError, unicode.IsControl(r), r == '\u2028', r == '\u2029':
			r = '\uFFFD'
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
