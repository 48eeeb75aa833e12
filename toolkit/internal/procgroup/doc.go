// Package procgroup ends process groups: the tools that start programs
// (run_command, script tools, stdio MCP servers) start each in a group of
// its own and end the whole group, so nothing a program started outlives it.
//
// It knows nothing of tools, actors or what the programs are: it signals
// and watches process groups by id, on Linux's /proc.
package procgroup
