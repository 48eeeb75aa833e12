package mcp

import (
	"fmt"
	"strings"
)

const (
	// maxToolName is the registry's limit on a tool name.
	maxToolName = 64
	// toolPrefix starts the registered name of every MCP tool.
	toolPrefix = "mcp__"
	// nameSep separates the server and the tool in a registered name.
	nameSep = "__"
	// maxServerName leaves room for the prefix, the separator and a tool
	// name of at least one character.
	maxServerName = maxToolName - len(toolPrefix) - len(nameSep) - 1
)

// nameChar reports whether r may appear in a registered tool name.
func nameChar(r rune) bool {
	return r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
}

// SanitizeServerName turns a configured server name into the part of tool
// names that names the server: characters outside [A-Za-z0-9_-] become "_",
// runs of "_" collapse into one and leading or trailing "_" are dropped, so
// the "__" that follows it in mcp__<server>__<tool> is unambiguous.
func SanitizeServerName(name string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(name) {
		if !nameChar(r) {
			r = '_'
		}
		if r == '_' && strings.HasSuffix(b.String(), "_") {
			continue
		}
		b.WriteRune(r)
	}
	return strings.Trim(b.String(), "_")
}

// sanitizeToolName replaces every character outside [A-Za-z0-9_-] by "_".
func sanitizeToolName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if !nameChar(r) {
			r = '_'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ToolName returns the registered name of tool on server:
// mcp__<sanitised server>__<sanitised tool>. It fails when the tool has no
// name or the result is longer than the registry's 64 characters.
func ToolName(server, tool string) (string, error) {
	if tool == "" {
		return "", fmt.Errorf("mcp: server %q lists a tool without a name", server)
	}
	name := toolPrefix + SanitizeServerName(server) + nameSep + sanitizeToolName(tool)
	if len(name) > maxToolName {
		return "", fmt.Errorf("mcp: tool %q of server %q would be registered as %s, longer than %d characters", tool, server, name, maxToolName)
	}
	return name, nil
}

// IsToolName reports whether name has the form of an MCP tool's
// registered name (mcp__<server>__<tool>), whether or not a server offers
// it now.
func IsToolName(name string) bool { return strings.HasPrefix(name, toolPrefix) }

// ServerOf returns the sanitised server part of an MCP tool's registered
// name; ok is false for a name that is not one.
func ServerOf(name string) (server string, ok bool) {
	rest, ok := strings.CutPrefix(name, toolPrefix)
	if !ok {
		return "", false
	}
	if server, _, ok = strings.Cut(rest, nameSep); !ok {
		return "", false
	}
	return server, true
}
