package service

import (
	"strings"

	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp"
	"github.com/tooldispatch/tooldispatch/toolkit/web"
)

// DiffLines splits Diff into lines with their kind, for the page.
func (v PendingView) DiffLines() []diffLine {
	if v.Diff == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(v.Diff, "\n"), "\n")
	out := make([]diffLine, len(lines))
	for i, l := range lines {
		out[i] = diffLine{Kind: diffKind(l), Text: l}
	}
	return out
}

type diffLine struct {
	Kind string // add, del, hunk, file or ctx
	Text string
}

func diffKind(l string) string {
	switch {
	case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		return "file"
	case strings.HasPrefix(l, "@@"):
		return "hunk"
	case strings.HasPrefix(l, "+"):
		return "add"
	case strings.HasPrefix(l, "-"):
		return "del"
	}
	return "ctx"
}

// change shows what a call would change, by its tool, as the tool's own
// package shows it: a run_command call's command line, an http_request
// call's request line, the MCP server an MCP tool's call goes to.
func change(tool, arguments string) (command, request, mcpServer string) {
	switch tool {
	case builtin.RunCommandName:
		return commandLine(arguments), "", ""
	case web.HTTPRequestName:
		return "", requestLine(arguments), ""
	}
	server, _ := mcp.ServerOf(tool)
	return "", "", server
}

// requestLine is web.RequestLine: the request line of an http_request call.
func requestLine(arguments string) string { return web.RequestLine(arguments) }

// commandLine is builtin.CommandLine: the command line of a run_command call.
func commandLine(arguments string) string { return builtin.CommandLine(arguments) }
