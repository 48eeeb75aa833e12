package mcp

import (
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

func TestToolName(t *testing.T) {
	long := strings.Repeat("x", 60)
	tests := []struct {
		name, server, tool string
		want               string
		wantErr            string
	}{
		{name: "plain", server: "everything", tool: "echo", want: "mcp__everything__echo"},
		{name: "dashes kept", server: "my-server", tool: "get-sum", want: "mcp__my-server__get-sum"},
		{name: "spaces and dots", server: "My Server.v2", tool: "files.read all", want: "mcp__My_Server_v2__files_read_all"},
		{name: "underscore runs collapse in the server", server: "a__b", tool: "c", want: "mcp__a_b__c"},
		{name: "edges trimmed", server: "_x_", tool: "t", want: "mcp__x__t"},
		{name: "tool underscores kept", server: "s", tool: "__init__", want: "mcp__s____init__"},
		{name: "non-ASCII", server: "données", tool: "résumé", want: "mcp__donn_es__r_sum_"},
		{name: "too long", server: "s", tool: long, wantErr: "longer than 64"},
		{name: "empty tool", server: "s", tool: "", wantErr: "without a name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ToolName(tt.server, tt.tool)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ToolName(%q, %q) = %q, %v; want error with %q", tt.server, tt.tool, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ToolName(%q, %q) = %q, %v; want %q", tt.server, tt.tool, got, err, tt.want)
			}
		})
	}
}

func TestConfigFromTOML(t *testing.T) {
	const file = `
[[mcp.servers]]
name = "files"
command = ["node", "/opt/mcp/server-filesystem/dist/index.js", "/srv/data"]
env = { MEMORY_FILE_PATH = "/var/lib/memory.jsonl" }
trusted = true
timeout = "20s"

[[mcp.servers]]
name = "search"
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer abc" }
connect_timeout = "5s"
ping_interval = "-1s"
hang_timeout = "2s"
no_dedup = true
`
	var cfg struct {
		MCP Config `toml:"mcp"`
	}
	md, err := toml.Decode(file, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if und := md.Undecoded(); len(und) != 0 {
		t.Fatalf("undecoded keys: %v", und)
	}
	want := Config{Servers: []ServerConfig{
		{
			Name: "files", Command: []string{"node", "/opt/mcp/server-filesystem/dist/index.js", "/srv/data"},
			Env: map[string]string{"MEMORY_FILE_PATH": "/var/lib/memory.jsonl"}, Trusted: true, Timeout: 20 * time.Second,
		},
		{
			Name: "search", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer abc"},
			ConnectTimeout: 5 * time.Second, PingInterval: -time.Second, HangTimeout: 2 * time.Second, NoDedup: true,
		},
	}}
	if diff := cmp.Diff(want, cfg.MCP); diff != "" {
		t.Fatalf("decoded config (-want +got):\n%s", diff)
	}
	if err := cfg.MCP.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := cfg.MCP.Servers[1].withDefaults().PingInterval; got != 0 {
		t.Errorf("negative ping_interval gives %s, want pings off (0)", got)
	}
}

func TestConfigValidate(t *testing.T) {
	cmd := []string{"mcp-server"}
	tests := []struct {
		name    string
		servers []ServerConfig
		want    string
	}{
		{"no name", []ServerConfig{{Command: cmd}}, "mcp: mcp.servers[0].name: must not be empty"},
		{"name without usable characters", []ServerConfig{{Name: "!!!", Command: cmd}}, "mcp.servers[0].name: \"!!!\" has no letter"},
		{"name too long", []ServerConfig{{Name: strings.Repeat("n", 57), Command: cmd}}, "mcp.servers[0].name: \"nnn"},
		{"neither command nor url", []ServerConfig{{Name: "a"}}, "mcp.servers[0].command: give command"},
		{"both", []ServerConfig{{Name: "a", Command: cmd, URL: "http://x"}}, "mcp.servers[0].url: give command or url, not both"},
		{"empty program", []ServerConfig{{Name: "a", Command: []string{""}}}, "mcp.servers[0].command: the program"},
		{"bad url", []ServerConfig{{Name: "a", URL: "ftp://x/y"}}, "mcp.servers[0].url: \"ftp://x/y\" is not an http"},
		{"negative timeout", []ServerConfig{{Name: "a", Command: cmd, Timeout: -1}}, "mcp.servers[0].timeout: must not be negative"},
		{"tiny result cap", []ServerConfig{{Name: "a", Command: cmd, MaxResultBytes: 10}}, "mcp.servers[0].max_result_bytes"},
		{"headers on stdio", []ServerConfig{{Name: "a", Command: cmd, Headers: map[string]string{"A": "b"}}}, "mcp.servers[0].headers: only a url server"},
		{"env on http", []ServerConfig{{Name: "a", URL: "http://x", Env: map[string]string{"A": "b"}}}, "mcp.servers[0].env: only a command server"},
		{"bad env name", []ServerConfig{{Name: "a", Command: cmd, Env: map[string]string{"A=B": "c"}}}, "mcp.servers[0].env: invalid variable name"},
		{"same prefix", []ServerConfig{{Name: "my server", Command: cmd}, {Name: "my_server", Command: cmd}},
			"mcp.servers[1].name: \"my_server\" gives the same tool prefix mcp__my_server__ as mcp.servers[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Config{Servers: tt.servers}.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v; want %q", err, tt.want)
			}
			if _, ok := err.(*ConfigError); !ok {
				t.Errorf("error type %T, want *ConfigError", err)
			}
		})
	}
	m := NewManager(nil, []ServerConfig{{Name: "a"}}, zerolog.Nop())
	if err := m.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "mcp.servers[0].command") {
		t.Errorf("Start with a bad config: %v", err)
	}
	m.Close()
}

func TestBackoffDelay(t *testing.T) {
	b := backoff{initial: 500 * time.Millisecond, max: 30 * time.Second}
	var got []time.Duration
	for attempt := range 9 {
		got = append(got, b.delay(attempt))
	}
	s := time.Second
	want := []time.Duration{s / 2, s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s, 30 * s}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delays (-want +got):\n%s", diff)
	}
	if d := b.delay(1000); d != 30*s {
		t.Errorf("delay(1000) = %s", d)
	}
}

func TestResultText(t *testing.T) {
	tests := []struct {
		name  string
		res   *mcp.CallToolResult
		limit int
		want  string
	}{
		{"texts joined", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: "b"}}}, 100, "a\nb"},
		{"embedded text resource", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://x", Text: "body"}}}}, 100,
			"[embedded resource mem://x]\nbody"},
		{"embedded blob", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://b", MIMEType: "application/zip", Blob: []byte("zip")}}}}, 100,
			"[embedded resource mem://b: application/zip, 3 bytes of binary data; not shown]"},
		{"audio", &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 3<<20)}}}, 100,
			"[audio: audio/wav, 3.0 MiB; over the 1.0 MiB a result's audio may have; not kept]"},
		{"structured only", &mcp.CallToolResult{StructuredContent: map[string]any{"n": 1}}, 100, `{"n":1}`},
		{"cut", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("é", 10)}}}, 5,
			"éé\n[… result cut at 4 bytes of 20 bytes …]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resultText(tt.res, tt.limit); got != tt.want {
				t.Errorf("resultText = %q, want %q", got, tt.want)
			}
		})
	}
}
