package service

import (
	"encoding/json"
	"strings"
	"time"
)

// PendingView is a pending confirmation as GET /v1/pending and the
// operator page show it: what would change, and until when it waits.
type PendingView struct {
	PendingConfirm
	// Command is a run_command call's argv as one shell-quoted line (or its
	// shell line).
	Command string `json:"command,omitempty"`
	// TimeoutAt is when the confirmation stops waiting and the call is
	// skipped.
	TimeoutAt time.Time `json:"timeout_at"`
}

// DiffLines splits Diff into lines with their kind, for the page.
func (v PendingView) DiffLines() []diffLine {
	if v.Diff == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(v.Diff, "\n"), "\n")
	out := make([]diffLine, len(lines))
	for i, l := range lines {
		out[i] = diffLine{Kind: diffKind(l), Text: l}
	}
	return out
}

type diffLine struct {
	Kind string // add, del, hunk, file or ctx
	Text string
}

func diffKind(l string) string {
	switch {
	case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		return "file"
	case strings.HasPrefix(l, "@@"):
		return "hunk"
	case strings.HasPrefix(l, "+"):
		return "add"
	case strings.HasPrefix(l, "-"):
		return "del"
	}
	return "ctx"
}

// pendingViews returns the views of the pending confirmations.
func (s *Server) pendingViews(ps []PendingConfirm) []PendingView {
	out := make([]PendingView, len(ps))
	for i, p := range ps {
		out[i] = s.pendingView(p)
	}
	return out
}

// pendingView computes what a pending confirmation shows. The preview of a
// call that changes workspace files (Diff, Note) was computed by the
// dispatcher when it asked, from the files its approval is bound to; it is
// shown as it came, never recomputed from the files as they are later.
func (s *Server) pendingView(p PendingConfirm) PendingView {
	v := PendingView{PendingConfirm: p, TimeoutAt: p.Since.Add(s.opts.Dispatcher.ConfirmTimeout())}
	if p.Tool == "run_command" {
		v.Command = commandLine(p.Arguments)
	}
	return v
}

// commandLine shows a run_command call's argv as one shell-quoted line, or
// its shell line as given; "" when the arguments have neither.
func commandLine(arguments string) string {
	var a struct {
		Argv  []string `json:"argv"`
		Shell string   `json:"shell"`
	}
	if json.Unmarshal([]byte(arguments), &a) != nil {
		return ""
	}
	if len(a.Argv) == 0 {
		if a.Shell != "" {
			return "sh -c " + shellQuote(a.Shell)
		}
		return ""
	}
	q := make([]string, len(a.Argv))
	for i, w := range a.Argv {
		q[i] = shellQuote(w)
	}
	return strings.Join(q, " ")
}

// shellQuote quotes w for a POSIX shell when it needs it: in single
// quotes, with each single quote written as '\”.
func shellQuote(w string) string {
	if w == "" {
		return "''"
	}
	if strings.IndexFunc(w, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
