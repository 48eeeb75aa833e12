package builtin

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/sandbox"
)

// Sentinel errors of the package; match them with errors.Is.
var (
	// ErrOutsideWorkspace: a path leads out of the workspace (a ".." escape,
	// an absolute path elsewhere, or a symlink that points outside).
	ErrOutsideWorkspace = errors.New("builtin: path is outside the workspace")
	// ErrProtected: a path leads to one of tooldispatch's own files (the
	// data directory, the secret key, the configuration; see WithProtected).
	ErrProtected = errors.New("builtin: path is one of tooldispatch's own files")
	// ErrVersionNotFound: the file has no kept version with that number. It
	// matches fs.ErrNotExist, as a store's missing version does.
	ErrVersionNotFound = fmt.Errorf("builtin: version not found: %w", fs.ErrNotExist)
)

// DefaultOutputCap is how much output run_command keeps when Deps.OutputCap
// is zero.
const DefaultOutputCap = 64 << 10

// Deps is what the built-in tools need from the embedding program. The zero
// value registers the tools that need nothing (calculate, write_todo,
// reasoning_guide).
type Deps struct {
	// Workspace roots every file tool and run_command. When nil, those tools
	// are not registered.
	Workspace *Workspace
	// Versions keeps the file versions behind edit_file, remove_file,
	// restore_file and file_history. When nil, an in-memory store is used
	// (versions are lost when the process ends).
	Versions VersionStore
	// Shell allows run_command's shell mode (a command line run by
	// /bin/sh -c). Without it, argv mode only, and argv that makes a shell
	// read a command line (sh -c, env sh -c, …) is refused too.
	Shell bool
	// Sandbox confines run_command's programs (see package sandbox). When
	// nil, commands run with every right of the embedding process.
	Sandbox *sandbox.Sandbox
	// OutputCap is how many bytes of output run_command keeps (head and
	// tail); zero means DefaultOutputCap.
	OutputCap int
	// Logger receives debug records of what the tools do (never argument
	// values that could hold secrets). The zero value logs nothing.
	Logger zerolog.Logger
}

// Validate reports the first bad field.
func (d Deps) Validate() error {
	if d.OutputCap < 0 {
		return fmt.Errorf("builtin: Deps.OutputCap must not be negative, got %d", d.OutputCap)
	}
	if d.OutputCap > 0 && d.OutputCap < 256 {
		return fmt.Errorf("builtin: Deps.OutputCap must be at least 256 bytes, got %d", d.OutputCap)
	}
	return nil
}

func (d Deps) withDefaults() Deps {
	if d.OutputCap == 0 {
		d.OutputCap = DefaultOutputCap
	}
	if d.Versions == nil && d.Workspace != nil {
		d.Versions = NewMemoryVersions()
	}
	d.Logger = d.Logger.With().Str("component", "builtin").Logger()
	return d
}

// Tools returns the built-in tools for deps, in name order, ready to
// register. It panics when deps do not validate (a start-up mistake).
func Tools(deps Deps) []toolkit.Tool {
	if err := deps.Validate(); err != nil {
		panic(err)
	}
	d := deps.withDefaults()
	tools := []toolkit.Tool{
		calculateTool(),
		reasoningGuideTool(),
		writeTodoTool(),
	}
	if d.Workspace != nil {
		f := &fileTools{ws: d.Workspace, versions: d.Versions, log: d.Logger}
		tools = append(tools,
			f.readFilesTool(),
			f.findFilesTool(),
			f.editFileTool(),
			f.removeFileTool(),
			f.restoreFileTool(),
			f.fileHistoryTool(),
			commandTool(d),
		)
	}
	slices.SortFunc(tools, func(a, b toolkit.Tool) int { return cmp.Compare(a.Name, b.Name) })
	return tools
}

// Register adds the built-in tools for deps to reg. Like
// toolkit.Registry.Register, it panics on a registration mistake.
func Register(reg *toolkit.Registry, deps Deps) {
	for _, t := range Tools(deps) {
		reg.Register(t)
	}
}
