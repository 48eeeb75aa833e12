package interact

import (
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// Deps is what the interaction tools need from the embedding program. The
// zero value registers ask_user and write_result (without its path
// argument's file writing).
type Deps struct {
	// Workspace is where write_result writes a path and where html_template
	// reads templates and writes its output. When nil, html_template is not
	// registered and write_result refuses a path.
	Workspace *builtin.Workspace
	// Versions keeps the previous content of a file that write_result or
	// html_template overwrites, so restore_file can undo it. Pass the same
	// Versions as builtin.Deps (for example the program's store).
	// When nil, no version is kept.
	Versions builtin.VersionStore
}

// Tools returns ask_user, write_result and, with a workspace,
// html_template, in name order, ready to register. test_tool is built
// separately by TestTool, since it needs the script tools' examples.
func Tools(d Deps) []toolkit.Tool {
	files := &wsFiles{ws: d.Workspace, versions: d.Versions}
	tools := []toolkit.Tool{askUserTool()}
	if d.Workspace != nil {
		tools = append(tools, htmlTemplateTool(files))
	}
	return append(tools, writeResultTool(files))
}

// Register adds the tools of Tools(d) to reg. Like toolkit.Registry.Register,
// it panics on a registration mistake.
func Register(reg *toolkit.Registry, d Deps) {
	for _, t := range Tools(d) {
		reg.Register(t)
	}
}
