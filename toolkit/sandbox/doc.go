// Package sandbox confines the programs that tools start (run_command,
// script tools) with Landlock, so that a command the model asked for may
// read only system directories, the workspace, a private temp directory and
// the paths the operator lists; may write only to the workspace and the
// private temp directory (and listed write paths); and may not open TCP
// connections or listen unless the operator allows network. A command
// keeps no capability (bounding, effective, permitted, inheritable and
// ambient sets emptied, no_new_privs set), even under a root tooldispatch,
// and gets stdin, stdout and stderr and no other descriptor. Where user
// namespaces are available, a command runs in a PID namespace of its own
// with that namespace's /proc, so that tooldispatch's process (its
// environment, memory map and command line) does not exist for it; and a
// command without network also gets a network namespace of its own (no
// interface but a down loopback), which cuts UDP, Multipath TCP and
// abstract Unix sockets too.
//
// Landlock restricts every thread of the process that applies it, for
// good. tooldispatch must stay unconfined, so the ruleset is applied by a
// helper: Wrap rewrites an exec.Cmd to start the current executable with a
// hidden first argument; the helper confines its own thread and then
// starts the real program from it, which inherits the domain (with
// namespaces in three stages, see stages_linux.go). The helper is
// recognised in this package's init function, so any binary that links the
// package (tooldispatch, an embedding program, a test binary) serves as its
// own helper with nothing to call from main. The policy reaches the helper
// in an environment variable that Wrap sets and the helper removes; the
// child's input plays no part in it.
//
// Landlock is an allow-list: a path inside an allowed tree cannot be
// denied. tooldispatch's own files (data directory, secret key,
// configuration) must therefore lie outside every allowed tree; New warns
// when they do not, and with required set commands are refused.
//
// The package knows nothing of tools, actors or storage.
package sandbox
