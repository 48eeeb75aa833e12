package service

import (
	"context"
	"encoding/json"
	"fmt"
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
	// skipped; absent for a deferred approval, which waits until answered.
	TimeoutAt *time.Time `json:"timeout_at,omitempty"`
	// Deferred: the call was committed awaiting_approval (confirm defer)
	// and its approval is kept in the store: it waits, across restarts,
	// until someone answers it on any member.
	Deferred bool `json:"deferred,omitempty"`
	// Ceiling is the approval the run had when a deferred call asked.
	Ceiling string `json:"ceiling,omitempty"`
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

// pendingViews returns the views of the pending confirmations: those
// running turns wait on (this member's broker), then the deferred
// approvals the store keeps (every member's, across restarts).
func (s *Server) pendingViews(ctx context.Context, ps []PendingConfirm) ([]PendingView, error) {
	out := make([]PendingView, 0, len(ps))
	seen := make(map[[2]string]bool, len(ps))
	for _, p := range ps {
		out = append(out, s.pendingView(p))
		seen[[2]string{p.Session, p.CallID}] = true
	}
	as, err := s.opts.Store.Approvals(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, a := range as {
		if a.Claimed || seen[[2]string{a.Session, a.CallID}] {
			continue // running now, or also asked by a running turn
		}
		v := PendingView{PendingConfirm: PendingConfirm{Session: a.Session, Run: a.Run, Turn: a.Turn, CallID: a.CallID,
			Tool: a.Tool, Arguments: a.Shown, ArgsHash: a.ArgsHash,
			Question: fmt.Sprintf("Allow %s to run with these arguments? It is not read-only. The turn did not wait: answer whenever you like.", a.Tool),
			Since:    a.Asked, Diff: a.Diff, Note: a.Note}, Deferred: true, Ceiling: a.Ceiling}
		if a.Tool == "run_command" {
			v.Command = commandLine(v.Arguments)
		}
		out = append(out, v)
	}
	return out, nil
}

// pendingView computes what a pending confirmation shows. The preview of a
// call that changes workspace files (Diff, Note) was computed by the
// dispatcher when it asked, from the files its approval is bound to; it is
// shown as it came, never recomputed from the files as they are later.
func (s *Server) pendingView(p PendingConfirm) PendingView {
	at := p.Since.Add(s.opts.Dispatcher.ConfirmTimeout())
	v := PendingView{PendingConfirm: p, TimeoutAt: &at}
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
