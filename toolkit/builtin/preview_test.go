package builtin

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// preview computes a call's Preview, and checks that FileState reads the
// same state the preview read.
func (e *testEnv) preview(name, args string) toolkit.Preview {
	e.t.Helper()
	tool := e.tools[name]
	if tool.Preview == nil || tool.FileState == nil {
		e.t.Fatalf("%s has no preview", name)
	}
	a := mustArgs(e.t, args)
	pv := tool.Preview(context.Background(), a)
	if st := tool.FileState(context.Background(), a); st != pv.State {
		e.t.Errorf("FileState %q differs from the state the preview read %q, with nothing changed", st, pv.State)
	}
	return pv
}

// previewPredicted checks that a preview computed before a call said what
// the call then did to rel: that it would fail when it failed, that nothing
// would change when nothing did, else exactly the diff between the file
// before (nil: absent) and after; and that FileState no longer matches the
// preview's state once the file changed.
func (e *testEnv) previewPredicted(pv toolkit.Preview, name, args, rel string, before *string, callErr error) {
	e.t.Helper()
	after, exists := e.read(rel)
	changed := exists != (before != nil) || (exists && after != *before)
	switch {
	case callErr != nil:
		if pv.Diff != "" || !strings.HasSuffix(pv.Note, "the call will fail") {
			e.t.Errorf("the call failed (%v), but its preview said: diff %q note %q", callErr, pv.Diff, pv.Note)
		}
	case !changed:
		if pv.Diff != "" || !strings.Contains(pv.Note, "would not change") {
			e.t.Errorf("the call changed nothing, but its preview said: diff %q note %q", pv.Diff, pv.Note)
		}
	default:
		var old []byte
		if before != nil {
			old = []byte(*before)
		}
		var now []byte
		if exists {
			now = []byte(after)
		}
		if want := UnifiedDiff(rel, old, now, before == nil, !exists); pv.Diff != want {
			e.t.Errorf("preview diff:\n%s\nwhat the call did:\n%s", pv.Diff, want)
		}
	}
	st := e.tools[name].FileState(context.Background(), mustArgs(e.t, args))
	if changed && st == pv.State {
		e.t.Errorf("the file changed, but FileState is still the approved state %q", st)
	}
	if !changed && st != pv.State {
		e.t.Errorf("nothing changed, but FileState %q differs from the approved %q", st, pv.State)
	}
}

func TestRemoveAndRestorePreviews(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(e *testEnv)
		tool   string
		args   string
		before *string // target.txt before the call; nil: absent
		note   string  // in the note
	}{
		{name: "remove", before: ptr("a\nb\n"), tool: "remove_file", args: `{"path":"target.txt"}`},
		{name: "remove a missing file", tool: "remove_file", args: `{"path":"target.txt"}`, note: "does not exist"},
		{name: "restore the latest version", before: ptr("three\n"), setup: func(e *testEnv) {
			e.call("edit_file", `{"path":"target.txt","content":"one\n"}`)
			e.call("edit_file", `{"path":"target.txt","content":"two\n"}`)
			e.call("edit_file", `{"path":"target.txt","content":"three\n"}`)
		}, tool: "restore_file", args: `{"path":"target.txt"}`, note: "restores target.txt to version 3"},
		{name: "restore a version", before: ptr("three\n"), setup: func(e *testEnv) {
			e.call("edit_file", `{"path":"target.txt","content":"one\n"}`)
			e.call("edit_file", `{"path":"target.txt","content":"two\n"}`)
			e.call("edit_file", `{"path":"target.txt","content":"three\n"}`)
		}, tool: "restore_file", args: `{"path":"target.txt","version":2}`, note: "restores target.txt to version 2"},
		{name: "restore to absence", before: ptr("one\n"), setup: func(e *testEnv) {
			e.call("edit_file", `{"path":"target.txt","content":"one\n"}`)
		}, tool: "restore_file", args: `{"path":"target.txt"}`, note: "records that it did not exist"},
		{name: "restore without versions", before: ptr("x\n"), tool: "restore_file", args: `{"path":"target.txt"}`, note: "no versions are kept"},
		{name: "restore a version that is not kept", before: ptr("one\n"), setup: func(e *testEnv) {
			e.call("edit_file", `{"path":"target.txt","content":"one\n"}`)
		}, tool: "restore_file", args: `{"path":"target.txt","version":7}`, note: "has no version 7"},
		{name: "a path outside", tool: "remove_file", args: `{"path":"../outside/secret.txt"}`, note: "the path is refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t)
			if tt.setup != nil {
				tt.setup(e)
			} else if tt.before != nil {
				e.write("target.txt", *tt.before)
			}
			if got, exists := e.read("target.txt"); tt.before != nil && (!exists || got != *tt.before) {
				t.Fatalf("setup left target.txt = %q (exists %v), want %q", got, exists, *tt.before)
			}
			pv := e.preview(tt.tool, tt.args)
			if !strings.Contains(pv.Note, tt.note) {
				t.Errorf("note %q lacks %q", pv.Note, tt.note)
			}
			_, err := e.call(tt.tool, tt.args)
			e.previewPredicted(pv, tt.tool, tt.args, "target.txt", tt.before, err)
		})
	}
}

// TestRestorePreviewBindsTheLatestVersion: restore_file without a version
// restores the latest kept one; a version kept after the preview (by an
// earlier call of the turn) changes what it would restore, so it changes
// the state the approval is bound to even when the file ends as it was.
func TestRestorePreviewBindsTheLatestVersion(t *testing.T) {
	e := newTestEnv(t)
	e.call("edit_file", `{"path":"target.txt","content":"one\n"}`)
	e.call("edit_file", `{"path":"target.txt","content":"two\n"}`)
	pv := e.preview("restore_file", `{"path":"target.txt"}`)
	e.call("edit_file", `{"path":"target.txt","content":"three\n"}`)
	e.call("edit_file", `{"path":"target.txt","content":"two\n"}`)
	st := e.tools["restore_file"].FileState(context.Background(), mustArgs(t, `{"path":"target.txt"}`))
	if st == pv.State {
		t.Fatalf("a new latest version left the approved state as it was: %q", st)
	}
	if got := toolkit.StatePaths(pv.State, st); len(got) != 1 || got[0] != "target.txt (its latest kept version)" {
		t.Errorf("changed: %q, want only the latest version", got)
	}
}

// TestPreviewOfADirectory: a call on a directory will fail, and says so.
func TestPreviewOfADirectory(t *testing.T) {
	e := newTestEnv(t)
	must(t, os.Mkdir(e.path("d"), 0o755))
	for _, c := range []struct{ tool, args string }{
		{"remove_file", `{"path":"d"}`}, {"edit_file", `{"path":"d","content":"x"}`}, {"restore_file", `{"path":"d"}`},
	} {
		pv := e.preview(c.tool, c.args)
		if pv.Diff != "" || !strings.Contains(pv.Note, "d is a directory, not a file: the call will fail") {
			t.Errorf("%s: %+v", c.tool, pv)
		}
		if _, err := e.call(c.tool, c.args); err == nil {
			t.Errorf("%s on a directory did not fail", c.tool)
		}
	}
}

// TestPreviewOfLargeFiles: a file above the diff bound is described, not
// diffed, and still bound by its content hash; one above the hash bound by
// its size and modification time.
func TestPreviewOfLargeFiles(t *testing.T) {
	e := newTestEnv(t)
	big := strings.Repeat("line\n", PreviewFileBytes/5+10)
	e.write("big.txt", big)
	pv := e.preview("edit_file", `{"path":"big.txt","content":"small\n"}`)
	if pv.Diff != "" || !strings.Contains(pv.Note, "too large to show a diff") || !strings.Contains(pv.State, "sha256:") {
		t.Errorf("preview of a large file: %+v", pv)
	}
	pv = e.preview("edit_file", `{"path":"big.txt","old_string":"line\nline","new_string":"x"}`)
	if pv.Diff != "" || !strings.Contains(pv.Note, "too large to show the patch") {
		t.Errorf("preview of a patch of a large file: %+v", pv)
	}
	e.write("big.txt", big[:len(big)-1]+"!")
	if st := e.tools["edit_file"].FileState(context.Background(), mustArgs(t, `{"path":"big.txt","content":"small\n"}`)); st == pv.State {
		t.Error("a change to a large file kept its state")
	}
}
