package interact

import (
	"context"
	"encoding/json"
	"fmt"
	"path"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// The previews of write_result (with a path) and html_template: what the
// call would write over the file as it is now, from one read of it (and of
// html_template's template file) whose state the approval is bound to.

// target snapshots the file a call writes, the path argument arg; fail is
// set when the call will fail on it.
func (f *wsFiles) target(a toolkit.Args, arg string) (snap builtin.Snapshot, fail *toolkit.Preview) {
	rels := f.paths(a.String(arg))
	if len(rels) == 0 {
		_, err := f.clean(a.String(arg))
		p := toolkit.Preview{Note: fmt.Sprintf("%s is refused: %s: the call will fail", arg, messages.ClipText(fmt.Sprint(err), 300))}
		return snap, &p
	}
	snap = f.ws.Snapshot(rels[0])
	why := ""
	if _, err := f.clean(a.String(arg)); err != nil {
		why = messages.ClipText(err.Error(), 300)
	} else if snap.Exists && !snap.Regular {
		why = fmt.Sprintf("%s is a %s, not a file", snap.Path, snap.State)
	} else if snap.Size > maxKeptBytes && f.versions != nil {
		why = fmt.Sprintf("%s is %s, more than the %s kept as a version", snap.Path, toolkit.HumanSize(int(snap.Size)), toolkit.HumanSize(maxKeptBytes))
	}
	if why != "" {
		p := builtin.FailingPreview(snap, why)
		return snap, &p
	}
	return snap, nil
}

// writeResultState is write_result's FileState: the state of its path.
func (f *wsFiles) writeResultState(_ context.Context, a toolkit.Args) string {
	return f.ws.FileState(f.paths(a.String("path"))...)
}

func (f *wsFiles) writeResultPreview(_ context.Context, a toolkit.Args) toolkit.Preview {
	snap, fail := f.target(a, "path")
	if fail != nil {
		return *fail
	}
	content := a.String("content")
	if a.String("format") == formatJSON && !json.Valid([]byte(content)) {
		return builtin.FailingPreview(snap, "format is json but content is not valid JSON")
	}
	return builtin.WritePreview(snap, []byte(content), false)
}

// templatePaths are the files an html_template call's preview reads: its
// output file, then its template file when it names one.
func (f *wsFiles) templatePaths(a toolkit.Args) []string {
	return append(f.paths(a.String("output_path")), f.paths(a.String("template_path"))...)
}

// htmlTemplateState is html_template's FileState.
func (f *wsFiles) htmlTemplateState(_ context.Context, a toolkit.Args) string {
	return f.ws.FileState(f.templatePaths(a)...)
}

// htmlTemplatePreview renders the template as the call would and previews
// writing the result; the template file, when one is named, is part of the
// state the approval is bound to.
func (f *wsFiles) htmlTemplatePreview(ctx context.Context, a toolkit.Args) toolkit.Preview {
	snap, fail := f.target(a, "output_path")
	if fail != nil {
		return *fail
	}
	text, name := a.String("template"), "template"
	state := builtin.StateOf(snap)
	if tpl := a.String("template_path"); tpl != "" {
		rels := f.paths(tpl)
		if len(rels) == 0 {
			return builtin.FailingPreview(snap, "template_path is refused")
		}
		ts := f.ws.Snapshot(rels[0])
		state += builtin.StateOf(ts)
		switch {
		case !ts.Exists:
			return toolkit.Preview{State: state, Note: fmt.Sprintf("the template %s does not exist: the call will fail", ts.Path)}
		case !ts.Diffable || ts.Size > maxTemplateBytes:
			return toolkit.Preview{State: state, Note: fmt.Sprintf("the template %s cannot be used (%s): the call will fail", ts.Path, ts.State)}
		}
		text, name = string(ts.Content), path.Base(ts.Path)
	}
	var data any = map[string]any{}
	if d, ok := a.Value["data"]; ok && d != nil {
		data = plainNumbers(d)
	}
	html, err := render(ctx, name, text, data, defaultRenderLimits)
	if err != nil {
		return toolkit.Preview{State: state, Note: messages.ClipText(err.Error(), 300) + ": the call will fail"}
	}
	p := builtin.WritePreview(snap, html, false)
	p.State = state
	return p
}
