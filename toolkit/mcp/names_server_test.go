package mcp

import "testing"

func TestServerOf(t *testing.T) {
	tests := []struct {
		name, tool, server string
		ok                 bool
	}{
		{"registered name", "mcp__git_hub__create_issue", "git_hub", true},
		{"made by ToolName", mustToolName(t, "My Server!", "list"), "My_Server", true},
		{"no tool part", "mcp__git_hub", "", false},
		{"not an MCP tool", "run_command", "", false},
		{"prefix only inside", "x_mcp__a__b", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server, ok := ServerOf(tt.tool)
			if server != tt.server || ok != tt.ok {
				t.Errorf("ServerOf(%q) = %q, %v; want %q, %v", tt.tool, server, ok, tt.server, tt.ok)
			}
			if IsToolName(tt.tool) != (tt.tool[:min(5, len(tt.tool))] == "mcp__") {
				t.Errorf("IsToolName(%q) = %v", tt.tool, IsToolName(tt.tool))
			}
		})
	}
}

func mustToolName(t *testing.T, server, tool string) string {
	t.Helper()
	n, err := ToolName(server, tool)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
