package interact

import (
	"context"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// toolOf returns a registered tool.
func (e *env) toolOf(t *testing.T, name string) toolkit.Tool {
	t.Helper()
	tool, ok := e.reg.Lookup(name)
	if !ok || tool.Preview == nil || tool.FileState == nil {
		t.Fatalf("%s is not registered with a preview", name)
	}
	return *tool
}

// TestWritePreviews: write_result with a path and html_template preview
// what they would write over the file as it is, and bind the approval to
// the files the preview read, html_template's template file included.
func TestWritePreviews(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name, tool, args string
		diff, note       string // parts of the diff and of the note
		changeAfter      string // a file whose change must change the state
	}{
		{name: "write_result over a file", tool: "write_result", args: `{"content":"new\n","format":"text","path":"out.txt"}`,
			diff: "-old\n+new\n", changeAfter: "out.txt"},
		{name: "write_result creates", tool: "write_result", args: `{"content":"new\n","format":"text","path":"fresh.txt"}`,
			diff: "--- /dev/null\n+++ b/fresh.txt", changeAfter: "fresh.txt"},
		{name: "write_result with invalid JSON", tool: "write_result", args: `{"content":"{x","format":"json","path":"out.txt"}`,
			note: "not valid JSON: the call will fail", changeAfter: "out.txt"},
		{name: "write_result into the data directory", tool: "write_result", args: `{"content":"x","format":"text","path":".tooldispatch/x"}`,
			note: "the call will fail", changeAfter: ".tooldispatch/x"},
		{name: "html_template inline", tool: "html_template", args: `{"template":"<p>{{.v}}</p>","data":{"v":"<new>"},"output_path":"out.txt"}`,
			diff: "+<p>&lt;new&gt;</p>", changeAfter: "out.txt"},
		{name: "html_template from a file", tool: "html_template", args: `{"template_path":"page.tmpl","data":{"v":"x"},"output_path":"out.txt"}`,
			diff: "+<b>x</b>", changeAfter: "page.tmpl"},
		{name: "html_template that fails", tool: "html_template", args: `{"template":"{{.v","output_path":"out.txt"}`,
			note: "the call will fail", changeAfter: "out.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.write(t, "out.txt", "old\n")
			e.write(t, "page.tmpl", "<b>{{.v}}</b>\n")
			tool := e.toolOf(t, tt.tool)
			a := mustArgs(t, tt.args)
			pv := tool.Preview(ctx, a)
			if !strings.Contains(pv.Diff, tt.diff) || !strings.Contains(pv.Note, tt.note) || (tt.diff == "") != (pv.Diff == "") {
				t.Errorf("preview: diff %q note %q, want diff with %q, note with %q", pv.Diff, pv.Note, tt.diff, tt.note)
			}
			if st := tool.FileState(ctx, a); st != pv.State {
				t.Errorf("FileState %q differs from the preview's %q, with nothing changed", st, pv.State)
			}
			if strings.HasPrefix(tt.changeAfter, ".tooldispatch") {
				return
			}
			e.write(t, tt.changeAfter, "changed\n")
			if st := tool.FileState(ctx, a); st == pv.State {
				t.Errorf("%s changed, but the state is still the approved one", tt.changeAfter)
			}
		})
	}
}
