// Package interact holds the tools through which a run talks to the people
// and files around it: ask_user (a question to the human behind the run),
// write_result (the run's final answer, optionally written to a file),
// html_template (renders Go html/template text into a workspace file) and
// test_tool (runs a script or ext tool's own example call).
//
// Files are read and written only inside the builtin.Workspace, through an
// os.Root opened on its directory, so no path or symlink leads out of it; a
// file that is overwritten keeps its previous content as a version when
// Deps.Versions is set (restore_file can then undo the change).
//
// The package knows nothing of actors or of the store: questions go through
// toolkit.Call.Ask, and script tools and their examples come from the
// lookup function given to TestTool.
package interact
