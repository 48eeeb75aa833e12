package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestExampleConfigLoads(t *testing.T) {
	cfg, err := loadConfig("../../examples/config.toml", t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Dispatcher.MaxConcurrency != 4 || cfg.Dispatcher.ConfirmTimeout.Duration != 2*time.Minute {
		t.Errorf("dispatcher = %+v", cfg.Dispatcher)
	}
	if len(cfg.Web.APIs) != 2 || cfg.Web.Timeout != 30*time.Second {
		t.Errorf("web = %+v", cfg.Web)
	}
	if len(cfg.MCP.Servers) != 1 || !cfg.MCP.Servers[0].Trusted {
		t.Errorf("mcp = %+v", cfg.MCP)
	}
	if len(cfg.Script.Tools) != 1 || !cfg.Script.Tools[0].ReadOnly {
		t.Errorf("script = %+v", cfg.Script)
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, body, want string
	}{
		{"unknown key", "[web]\nallow_everything = true\n", "unknown keys: web.allow_everything"},
		{"bad chaos", "[chaos]\nseed = 1\n[[chaos.rules]]\ntools = [\"*\"]\nfaults = [{kind = \"melt\", probability = 0.1}]\n", "chaos"},
		{"bad toml", "[web\n", "config"},
		{"negative concurrency", "[dispatcher]\nmax_concurrency = -1\n", "max_concurrency"},
		{"unknown format policy", "[dispatcher]\nformats = \"sometimes\"\n", "dispatcher.formats"},
		{"negative pattern timeout", "[dispatcher]\npattern_timeout = \"-1s\"\n", "pattern_timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadConfig(write(strings.ReplaceAll(c.name, " ", "_")+".toml", c.body), t.TempDir(), zerolog.Nop())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

// TestConfigInsideWorkspaceTrustsNothing: a configuration file the
// repository ships cannot approve its own tools.
func TestConfigInsideWorkspaceTrustsNothing(t *testing.T) {
	ws := t.TempDir()
	body := `[[mcp.servers]]
name = "x"
command = ["true"]
trusted = true

[[script.manifests]]
path = "tools.toml"
trusted = true

[[script.tools]]
name = "t"
description = "d"
schema = '{"type":"object"}'
command = ["true"]
read_only = true
`
	p := filepath.Join(ws, "tooldispatch.toml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(p, ws, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MCP.Servers[0].Trusted || cfg.Script.Manifests[0].Trusted || cfg.Script.Tools[0].ReadOnly {
		t.Fatalf("trust survived a configuration inside the workspace: %+v %+v %+v", cfg.MCP.Servers[0], cfg.Script.Manifests[0], cfg.Script.Tools[0])
	}
	outside, err := loadConfig(p, t.TempDir(), zerolog.Nop())
	if err != nil || !outside.Script.Tools[0].ReadOnly {
		t.Fatalf("the same file outside the workspace: %v", err)
	}
}
