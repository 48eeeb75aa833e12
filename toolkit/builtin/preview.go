package builtin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Bounds of what a preview reads and shows.
const (
	// maxStateHash: a file up to this size is hashed whole for the state an
	// approval is bound to; a larger one is described by its size and
	// modification time.
	maxStateHash = 64 << 20
	// PreviewFileBytes is the largest file a preview diffs, before or after.
	PreviewFileBytes = 256 << 10
	// diffContext is how many unchanged lines surround each change.
	diffContext = 3
)

// Snapshot is one read of a workspace file for a preview: the state an
// approval is bound to and, for a small regular file, its content, both
// from the same read.
type Snapshot struct {
	Path string
	// State describes the file as toolkit.Preview.State does, without the
	// path: "sha256:… size N", "missing", "directory", "not a regular
	// file", "size N, modified T (not hashed)" or "unreadable: …".
	State  string
	Exists bool
	// Regular: a regular file (Size is its size).
	Regular bool
	Size    int64
	// Content is the whole content when Diffable.
	Content  []byte
	Diffable bool
	// Err is why the file could not be read.
	Err error
}

// Snapshot reads the file at the cleaned workspace-relative path rel once:
// its state and, when it is a regular file of at most PreviewFileBytes, its
// content. tooldispatch's own files and paths leading out read as
// unreadable.
func (w *Workspace) Snapshot(rel string) Snapshot {
	s := Snapshot{Path: rel}
	f, err := w.open(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.State = "missing"
		return s
	case err != nil:
		s.State, s.Exists, s.Err = "unreadable: "+messages.ClipText(err.Error(), 200), true, err
		return s
	}
	defer f.Close()
	s.Exists = true
	fi, err := f.Stat()
	switch {
	case err != nil:
		s.State, s.Err = "unreadable: "+messages.ClipText(err.Error(), 200), err
		return s
	case fi.IsDir():
		s.State = "directory"
		return s
	case !fi.Mode().IsRegular():
		s.State = "not a regular file"
		return s
	}
	s.Regular, s.Size = true, fi.Size()
	if fi.Size() > maxStateHash {
		s.State = "size " + strconv.FormatInt(fi.Size(), 10) + ", modified " + strconv.FormatInt(fi.ModTime().UnixNano(), 10) + " (not hashed)"
		return s
	}
	h := sha256.New()
	var head bytes.Buffer
	n, err := io.Copy(io.MultiWriter(h, &capWriter{buf: &head, limit: PreviewFileBytes + 1}), io.LimitReader(f, maxStateHash+1))
	if err != nil {
		s.State, s.Err = "unreadable: "+messages.ClipText(err.Error(), 200), err
		return s
	}
	s.Size = n
	s.State = "sha256:" + hex.EncodeToString(h.Sum(nil)) + " size " + strconv.FormatInt(n, 10)
	if n <= PreviewFileBytes {
		s.Content, s.Diffable = head.Bytes(), true
	}
	return s
}

// capWriter keeps the first limit bytes written to it and drops the rest.
type capWriter struct {
	buf   *bytes.Buffer
	limit int
}

func (c *capWriter) Write(p []byte) (int, error) {
	if room := c.limit - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// StateOf is the toolkit.Preview.State of snapshots, in their order.
func StateOf(snaps ...Snapshot) string {
	var b strings.Builder
	for _, s := range snaps {
		b.WriteString(s.Path)
		b.WriteByte(0)
		b.WriteString(s.State)
		b.WriteByte('\n')
	}
	return b.String()
}

// FileState reads the state of the cleaned workspace-relative paths rels
// now, in the form of toolkit.Preview.State: a Tool.FileState for tools
// whose preview reads exactly those paths.
func (w *Workspace) FileState(rels ...string) string {
	snaps := make([]Snapshot, len(rels))
	for i, rel := range rels {
		snaps[i] = w.stateOnly(rel)
	}
	return StateOf(snaps...)
}

// stateOnly is Snapshot without keeping the content.
func (w *Workspace) stateOnly(rel string) Snapshot {
	s := w.Snapshot(rel)
	s.Content, s.Diffable = nil, false
	return s
}

// UnifiedDiff is the unified diff from before to after of the file rel,
// from /dev/null when created and to /dev/null when removed; "" when
// nothing changes. It is whole (the dispatcher redacts a preview, then
// cuts it); its size is bounded by the sides', at most PreviewFileBytes
// each where previews call it.
func UnifiedDiff(rel string, before, after []byte, created, removed bool) string {
	from, to := "a/"+rel, "b/"+rel
	if created {
		from = "/dev/null"
	}
	if removed {
		to = "/dev/null"
	}
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: splitLines(string(before)), B: splitLines(string(after)), FromFile: from, ToFile: to, Context: diffContext,
	})
	if err != nil {
		return ""
	}
	return text
}

// splitLines splits text into lines that keep their newline; a last line
// without one gets it, so the diff stays line based.
func splitLines(text string) []string {
	if text == "" {
		return nil
	}
	lines := strings.SplitAfter(text, "\n")
	if last := len(lines) - 1; lines[last] == "" {
		lines = lines[:last]
	} else {
		lines[last] += "\n"
	}
	return lines
}

// WritePreview previews replacing the file of snap with content (or
// removing it, when remove): a diff when both sides are small enough, a
// note otherwise. Its State is snap's.
func WritePreview(snap Snapshot, content []byte, remove bool) toolkit.Preview {
	p := toolkit.Preview{State: StateOf(snap)}
	switch {
	case snap.Err != nil:
		p.Note = fmt.Sprintf("%s cannot be read: %s", snap.Path, messages.ClipText(snap.Err.Error(), 200))
	case snap.Exists && !snap.Regular:
		p.Note = fmt.Sprintf("%s is a %s, not a file", snap.Path, snap.State)
	case remove && !snap.Exists:
		p.Note = fmt.Sprintf("%s does not exist", snap.Path)
	case snap.Exists && !snap.Diffable:
		p.Note = fmt.Sprintf("%s is %s, too large to show a diff of", snap.Path, toolkit.HumanSize(snap.Size))
		if remove {
			p.Note = fmt.Sprintf("removes %s (%s); too large to show", snap.Path, toolkit.HumanSize(snap.Size))
		} else {
			p.Note += fmt.Sprintf("; it is replaced by %s", toolkit.HumanSize(int64(len(content))))
		}
	case !remove && len(content) > PreviewFileBytes:
		if snap.Exists {
			p.Note = fmt.Sprintf("replaces %s (%s) with %s, too large to show a diff of", snap.Path, toolkit.HumanSize(snap.Size), toolkit.HumanSize(int64(len(content))))
		} else {
			p.Note = fmt.Sprintf("creates %s (%s), too large to show", snap.Path, toolkit.HumanSize(int64(len(content))))
		}
	case snap.Exists && !remove && bytes.Equal(snap.Content, content):
		p.Note = fmt.Sprintf("%s already has this content: the file would not change", snap.Path)
	default:
		if remove {
			content = nil
		}
		p.Diff = UnifiedDiff(snap.Path, snap.Content, content, !snap.Exists, remove)
	}
	return p
}

// FailingPreview is the preview of a call that will fail on the file of
// snap as it is: the reason, and the state it was read in.
func FailingPreview(snap Snapshot, why string) toolkit.Preview {
	return toolkit.Preview{State: StateOf(snap), Note: why + ": the call will fail"}
}
