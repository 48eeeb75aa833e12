package service

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/tooldispatch/tooldispatch/messages"
)

// Bounds of what a pending confirmation shows.
const (
	// previewFileBytes is the largest current file a diff is computed
	// against; a larger one is not diffed.
	previewFileBytes = 256 << 10
	// previewDiffBytes bounds a diff's text; the rest is cut.
	previewDiffBytes = 64 << 10
	// diffContext is how many unchanged lines surround each change.
	diffContext = 3
)

// PendingView is a pending confirmation as GET /v1/pending and the
// operator page show it: what would change, and until when it waits.
type PendingView struct {
	PendingConfirm
	// Diff is a unified diff of what an edit_file or remove_file call
	// would do to the current file, computed by the server; Note says why
	// there is none when one was expected.
	Diff string `json:"diff,omitempty"`
	Note string `json:"note,omitempty"`
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

// pendingView computes what a pending confirmation shows.
func (s *Server) pendingView(p PendingConfirm) PendingView {
	v := PendingView{PendingConfirm: p, TimeoutAt: p.Since.Add(s.opts.Dispatcher.ConfirmTimeout())}
	switch p.Tool {
	case "edit_file", "remove_file":
		v.Diff, v.Note = s.fileDiff(p.Tool, p.Arguments)
	case "run_command":
		v.Command = commandLine(p.Arguments)
	}
	return v
}

// fileDiff is the unified diff an edit_file or remove_file call would make
// to the current file, or a note saying why there is none.
func (s *Server) fileDiff(tool, arguments string) (diff, note string) {
	var a struct {
		Path       string  `json:"path"`
		Content    *string `json:"content"`
		OldString  string  `json:"old_string"`
		NewString  string  `json:"new_string"`
		ReplaceAll bool    `json:"replace_all"`
	}
	if err := json.Unmarshal([]byte(arguments), &a); err != nil || a.Path == "" {
		return "", "the arguments name no file"
	}
	ws := s.opts.Workspace
	if ws == nil {
		return "", ""
	}
	rel, err := ws.Clean(a.Path)
	if err != nil {
		return "", "the path is refused: " + messages.ClipText(err.Error(), 200)
	}
	old, exists, err := ws.ReadFile(rel, previewFileBytes)
	if err != nil {
		return "", "the current file cannot be read: " + messages.ClipText(err.Error(), 200)
	}
	cur := string(old)
	var next string
	switch {
	case tool == "remove_file":
		if !exists {
			return "", "there is no such file"
		}
	case a.Content != nil:
		next = *a.Content
	case a.OldString == "":
		return "", "the arguments give neither content nor old_string"
	case !exists:
		return "", "there is no such file to patch"
	default:
		n := strings.Count(cur, a.OldString)
		if n == 0 || (n > 1 && !a.ReplaceAll) {
			return "", "old_string does not appear exactly once in the current file: the call will fail"
		}
		if a.ReplaceAll {
			next = strings.ReplaceAll(cur, a.OldString, a.NewString)
		} else {
			next = strings.Replace(cur, a.OldString, a.NewString, 1)
		}
	}
	from, to := "a/"+rel, "b/"+rel
	if !exists {
		from = "/dev/null"
	}
	if tool == "remove_file" {
		to = "/dev/null"
	}
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: splitLines(cur), B: splitLines(next), FromFile: from, ToFile: to, Context: diffContext,
	})
	if err != nil {
		return "", "the diff could not be computed"
	}
	if text == "" {
		return "", "the file would not change"
	}
	if len(text) > previewDiffBytes {
		text = strings.ToValidUTF8(text[:previewDiffBytes], "") + "\n… (diff cut)\n"
	}
	return text, ""
}

// splitLines splits text into lines that keep their newline; a last line
// without one gets it, so the diff stays line based.
func splitLines(text string) []string {
	lines := strings.SplitAfter(text, "\n")
	if last := len(lines) - 1; lines[last] == "" {
		lines = lines[:last]
	} else {
		lines[last] += "\n"
	}
	return lines
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
