// Package builtin holds the built-in tools of tooldispatch: the file tools
// (read_files, find_files, edit_file, remove_file, restore_file,
// file_history), run_command, calculate, write_todo and reasoning_guide.
//
// Register adds them to a toolkit.Registry with their schemas, flags,
// timeouts and de-duplication hints (SPEC sections 5 and 6). Every file tool
// and run_command works inside a Workspace, which goes through os.Root so
// that no path, symlink or symlink swap leads out of it.
//
// The package knows nothing of actors or of how results and file versions
// are stored (it must not import cachestore): versions go through the
// three-method VersionStore, which the embedding program's store satisfies.
package builtin
