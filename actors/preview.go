package actors

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Approvals bound to what the person saw (SPEC §16): a call whose tool
// previews the files it changes (Tool.Preview) is asked with that preview,
// computed once when it is asked, and its approval holds only while the
// files are in the state the preview read. Just before the call runs (pass
// 2, after the earlier calls of its turn), callActor.run reads the state
// again (Tool.FileState); when it differs, the call does not run.

// Bounds of a preview as it is shown, after redaction.
const (
	maxPreviewDiff = 64 << 10
	maxPreviewNote = 4 << 10
)

// shown is a preview as a person is shown it: redacted whole (a file may
// hold a stored secret's value), then cut.
func shown(pv toolkit.Preview, r toolkit.Redactor) toolkit.Preview {
	if r != nil {
		pv.Diff, pv.Note = r.Redact(pv.Diff), r.Redact(pv.Note)
	}
	if len(pv.Diff) > maxPreviewDiff {
		pv.Diff = pv.Diff[:toolkit.SafeCut(pv.Diff, maxPreviewDiff)] + "\n… (diff cut)\n"
	}
	pv.Note = clipRedacted(nil, pv.Note, maxPreviewNote)
	return pv
}

// previewed is a call's preview, computed off the preflight actor's
// goroutine and piped back to it.
type previewed struct {
	idx     int
	preview toolkit.Preview
	failed  string // the preview panicked: why
}

// computePreview runs a tool's Preview; a panic is reported, not raised.
func computePreview(ctx context.Context, preview toolkit.PreviewFunc, args toolkit.Args, idx int) (m *previewed) {
	m = &previewed{idx: idx}
	defer func() {
		if v := recover(); v != nil {
			m.failed = messages.ClipText(fmt.Sprint(v), 300)
		}
	}()
	m.preview = preview(ctx, args)
	return m
}

// earlierWriters is a note for p's preview when approved calls before it in
// the turn may change the files it previews: they run first, and if the
// files are then not as shown, p does not run.
func earlierWriters(plans []*callPlan, p *callPlan) string {
	var mine []string
	if p.tool.Paths != nil {
		mine = p.tool.Paths(p.args)
	}
	var who []string
	var touched []string
	for _, q := range plans {
		if q == p || q.idx >= p.idx || q.decided != nil || q.dupOf >= 0 || q.readOnly || q.tool == nil {
			continue
		}
		if q.tool.Paths == nil {
			who = append(who, fmt.Sprintf("%s (%s)", messages.ClipText(q.id, 80), q.name))
			continue
		}
		hit := false
		for _, path := range q.tool.Paths(q.args) {
			if slices.Contains(mine, path) {
				hit = true
				if !slices.Contains(touched, path) {
					touched = append(touched, path)
				}
			}
		}
		if hit {
			who = append(who, fmt.Sprintf("%s (%s)", messages.ClipText(q.id, 80), q.name))
		}
	}
	if len(who) == 0 {
		return ""
	}
	what := "files"
	if len(touched) > 0 {
		what = clipJoin(touched)
	}
	return fmt.Sprintf("approved calls earlier in this turn may change %s before this call runs: %s. This preview shows the files as they are now; if they are not so when this call's turn comes, it does not run.",
		what, strings.Join(who, ", "))
}

// clipJoin joins paths for a text, each clipped.
func clipJoin(paths []string) string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = messages.ClipText(p, 200)
	}
	return strings.Join(out, ", ")
}

// changedText is the result of an approved call whose files changed after
// its preview was shown.
func changedText(approved, now string) string {
	what := "its files"
	if paths := toolkit.StatePaths(approved, now); len(paths) > 0 {
		what = clipJoin(paths)
	}
	return fmt.Sprintf("skipped: the file changed after the approval: %s is no longer as the preview the approval was given for showed it, so the call did not run.\n"+
		"next: read %s again; if the change is still wanted, make the call again: it is then shown for approval with the file as it is now.", what, what)
}

// stillAsApproved checks, just before an approved call runs, that the files
// its preview read are as they were; it returns the skipped result when not.
func stillAsApproved(ctx context.Context, p *callPlan) *messages.ToolMessage {
	if !p.bound || p.tool.FileState == nil {
		return nil
	}
	if now := p.tool.FileState(ctx, p.args); now != p.boundState {
		return toolMsg(p, toolkit.StatusSkipped, changedText(p.boundState, now))
	}
	return nil
}
