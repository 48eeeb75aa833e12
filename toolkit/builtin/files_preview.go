package builtin

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// The previews of edit_file, remove_file and restore_file: what a call
// would do to its file as it is now, computed from one read of the file
// whose state the approval is then bound to (toolkit.Tool.Preview).

// refused is the preview of a call whose path the tool refuses: nothing is
// read, so nothing binds the approval but the arguments.
func refused(err error) toolkit.Preview {
	return toolkit.Preview{Note: "the path is refused: " + messages.ClipText(err.Error(), 300) + ": the call will fail"}
}

// pathState is the FileState of edit_file and remove_file: the state of
// the path argument's file.
func (f *fileTools) pathState(_ context.Context, a toolkit.Args) string {
	return f.ws.FileState(f.cleanPaths(a.String("path"))...)
}

// editable snapshots the file an edit_file, remove_file or restore_file
// call changes; fail is set when the call will fail on it as it is.
func (f *fileTools) editable(a toolkit.Args) (snap Snapshot, fail *toolkit.Preview) {
	rel, err := f.ws.Clean(a.String("path"))
	if err != nil {
		p := refused(err)
		return Snapshot{}, &p
	}
	snap = f.ws.Snapshot(rel)
	why := ""
	switch {
	case rel == ".":
		why = "the workspace directory itself is not a file"
	case snap.Err != nil:
		why = "it cannot be read: " + messages.ClipText(snap.Err.Error(), 200)
	case snap.Exists && !snap.Regular:
		why = fmt.Sprintf("%s is a %s, not a file", rel, snap.State)
	case snap.Size > maxEditBytes:
		why = fmt.Sprintf("%s is %s, more than the %s this tool handles", rel, toolkit.HumanSize(snap.Size), toolkit.HumanSize(maxEditBytes))
	}
	if why == "" {
		if err := f.ws.CheckWrite(rel); err != nil {
			why = messages.ClipText(err.Error(), 300)
		}
	}
	if why != "" {
		p := FailingPreview(snap, why)
		return snap, &p
	}
	return snap, nil
}

func (f *fileTools) editPreview(_ context.Context, a toolkit.Args) toolkit.Preview {
	snap, fail := f.editable(a)
	if fail != nil {
		return *fail
	}
	mode, err := editModeOf(a)
	if err != nil {
		return FailingPreview(snap, err.Error())
	}
	if mode == editWhole {
		return WritePreview(snap, []byte(a.String("content")), false)
	}
	if snap.Exists && !snap.Diffable {
		return toolkit.Preview{State: StateOf(snap), Note: fmt.Sprintf("%s is %s, too large to show the patch in", snap.Path, toolkit.HumanSize(snap.Size))}
	}
	updated, _, err := patched(snap.Path, string(snap.Content), snap.Exists, a)
	if err != nil {
		return FailingPreview(snap, err.Error())
	}
	return WritePreview(snap, []byte(updated), false)
}

func (f *fileTools) removePreview(_ context.Context, a toolkit.Args) toolkit.Preview {
	snap, fail := f.editable(a)
	if fail != nil {
		return *fail
	}
	if !snap.Exists {
		return FailingPreview(snap, snap.Path+" does not exist")
	}
	return WritePreview(snap, nil, true)
}

// latestVersion is the pseudo-path of a restore_file state line that
// records which version "the latest" was: a version kept by an earlier
// call of the turn changes what the call would restore.
func latestVersion(rel string) string { return rel + " (its latest kept version)" }

// restoreTarget resolves the version a restore_file call restores, as its
// handler does, and the state line of that choice when the call names no
// version (State form, "" otherwise).
func (f *fileTools) restoreTarget(ctx context.Context, rel string, a toolkit.Args) (target VersionInfo, line string, err error) {
	vs, err := f.versions.FileVersions(ctx, f.ws.Dir(), rel)
	want := a.Int("version", 0)
	if want == 0 {
		st := "none"
		switch {
		case err != nil:
			st = "unreadable: " + messages.ClipText(err.Error(), 200)
		case len(vs) > 0:
			st = fmt.Sprintf("version %d", vs[len(vs)-1].Version)
		}
		line = StateOf(Snapshot{Path: latestVersion(rel), State: st})
	}
	switch {
	case err != nil:
		return target, line, fmt.Errorf("listing versions of %s: %w", rel, err)
	case len(vs) == 0:
		return target, line, fmt.Errorf("no versions are kept for %s; nothing to restore", rel)
	}
	target = vs[len(vs)-1]
	if want != 0 {
		i := slices.IndexFunc(vs, func(v VersionInfo) bool { return v.Version == want })
		if i < 0 {
			return target, line, fmt.Errorf("%s has no version %d (kept: %d to %d); see file_history", rel, want, vs[0].Version, vs[len(vs)-1].Version)
		}
		target = vs[i]
	}
	return target, line, nil
}

// restoreState is the FileState of restore_file: the file's state and,
// when the call names no version, which version is the latest.
func (f *fileTools) restoreState(ctx context.Context, a toolkit.Args) string {
	rels := f.cleanPaths(a.String("path"))
	if len(rels) == 0 {
		return ""
	}
	_, line, _ := f.restoreTarget(ctx, rels[0], a)
	return f.ws.FileState(rels[0]) + line
}

func (f *fileTools) restorePreview(ctx context.Context, a toolkit.Args) toolkit.Preview {
	var target VersionInfo
	var line string
	var err error
	if rels := f.cleanPaths(a.String("path")); len(rels) > 0 {
		target, line, err = f.restoreTarget(ctx, rels[0], a)
	}
	with := func(p toolkit.Preview) toolkit.Preview {
		p.State += line
		return p
	}
	snap, fail := f.editable(a)
	if fail != nil {
		return with(*fail)
	}
	if err != nil {
		return with(FailingPreview(snap, messages.ClipText(err.Error(), 300)))
	}
	desc := fmt.Sprintf("restores %s to version %d (%s, %s)", snap.Path, target.Version, target.Time.UTC().Format(time.RFC3339), target.Note)
	if target.Deleted {
		if !snap.Exists {
			return with(toolkit.Preview{State: StateOf(snap), Note: desc + ", which records that it did not exist; it does not exist now: nothing would change"})
		}
		p := WritePreview(snap, nil, true)
		p.Note = join(desc+", which records that it did not exist: the file is removed", p.Note)
		return with(p)
	}
	content, _, err := f.versions.FileVersionContent(ctx, f.ws.Dir(), snap.Path, target.Version)
	if err != nil {
		return with(FailingPreview(snap, fmt.Sprintf("reading version %d of %s: %s", target.Version, snap.Path, messages.ClipText(err.Error(), 200))))
	}
	p := WritePreview(snap, content, false)
	p.Note = join(desc, p.Note)
	return with(p)
}

// join joins two sentences of a note with "; ", either may be empty.
func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
