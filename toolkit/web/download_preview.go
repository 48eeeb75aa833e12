package web

import (
	"context"
	"fmt"
	"strings"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// downloadPaths is the path a download_file call saves to, cleaned; none
// when it is invalid.
func (w *Web) downloadPaths(a toolkit.Args) []string {
	if rel, err := w.ws.Clean(a.String("path")); err == nil {
		return []string{rel}
	}
	return nil
}

// downloadState is download_file's FileState: the state of the file it
// saves to.
func (w *Web) downloadState(_ context.Context, a toolkit.Args) string {
	return w.ws.FileState(w.downloadPaths(a)...)
}

// downloadPreview says what a download_file call would do to its file as
// it is now: create it, replace it, or fail. What the URL will return is
// not known before the call runs, so there is no diff; the approval is
// bound to the state of the file it replaces (or its absence). The URL is
// shown as given: a ${secret:NAME} reference is not resolved.
func (w *Web) downloadPreview(_ context.Context, a toolkit.Args) toolkit.Preview {
	rels := w.downloadPaths(a)
	if len(rels) == 0 {
		_, err := w.ws.Clean(a.String("path"))
		return toolkit.Preview{Note: "the path is refused: " + messages.ClipText(fmt.Sprint(err), 300) + ": the call will fail"}
	}
	rel := rels[0]
	snap := w.ws.Snapshot(rel)
	src := messages.ClipText(strings.TrimSpace(a.String("url")), 500)
	why := ""
	switch {
	case rel == ".":
		why = "path is the workspace directory"
	case rel == dataDir || strings.HasPrefix(rel, dataDir+"/"):
		why = "path is inside tooldispatch's data directory"
	case snap.Exists && !snap.Regular:
		why = fmt.Sprintf("%s is a %s", rel, snap.State)
	case snap.Exists && !a.Bool("overwrite"):
		why = fmt.Sprintf("%s already exists and overwrite is not true", rel)
	}
	if why == "" {
		if err := w.ws.CheckWrite(rel); err != nil {
			why = messages.ClipText(err.Error(), 300)
		}
	}
	if why != "" {
		return builtin.FailingPreview(snap, why)
	}
	if snap.Exists {
		return toolkit.Preview{State: builtin.StateOf(snap), Note: fmt.Sprintf("downloads %s into %s, replacing its %s of content (the new content is not known before the call runs)", src, rel, toolkit.HumanSize(snap.Size))}
	}
	return toolkit.Preview{State: builtin.StateOf(snap), Note: fmt.Sprintf("downloads %s into %s, a new file", src, rel)}
}
