package mcp

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/internal/hostform"
)

// Defaults filled in for zero fields of a ServerConfig.
const (
	// DefaultCallTimeout is the timeout of one tool call.
	DefaultCallTimeout = toolkit.DefaultToolTimeout
	// DefaultConnectTimeout bounds starting a server, its initialize
	// handshake and its first listing of the tools, together, and each
	// later listing.
	DefaultConnectTimeout = 30 * time.Second
	// DefaultPingInterval is how often a session is pinged; a server that
	// stops answering pings is declared hung and restarted.
	DefaultPingInterval = 30 * time.Second
	// DefaultMaxResultBytes is how much of a tool result is kept.
	DefaultMaxResultBytes = 256 << 10
)

// minResultBytes is the smallest accepted max_result_bytes.
const minResultBytes = 256

// Config is the [mcp] table of the operator's configuration file.
//
//	[[mcp.servers]]
//	name    = "files"
//	command = ["mcp-server-filesystem", "/srv/data"]
//	trusted = true
//	timeout = "20s"
//
//	[[mcp.servers]]
//	name = "search"
//	url  = "https://mcp.example.com/mcp"
//	headers = { Authorization = "Bearer …" }
type Config struct {
	// Servers lists the MCP servers to start ([[mcp.servers]]).
	Servers []ServerConfig `toml:"servers"`
}

// Validate reports the first bad field, named as in the file
// (mcp.servers[1].url), and refuses two servers whose names sanitise to
// the same tool-name prefix.
func (c Config) Validate() error {
	seen := map[string]int{}
	for i, s := range c.Servers {
		if err := s.Validate(); err != nil {
			if ce, ok := err.(*ConfigError); ok {
				return &ConfigError{Field: fmt.Sprintf("mcp.servers[%d].%s", i, ce.Field), Problem: ce.Problem}
			}
			return err
		}
		key := SanitizeServerName(s.Name)
		if j, dup := seen[key]; dup {
			return &ConfigError{
				Field:   fmt.Sprintf("mcp.servers[%d].name", i),
				Problem: fmt.Sprintf("%q gives the same tool prefix mcp__%s__ as mcp.servers[%d] (%q)", s.Name, key, j, c.Servers[j].Name),
			}
		}
		seen[key] = i
	}
	return nil
}

// ServerConfig is one MCP server: a command run with stdio, a Streamable
// HTTP endpoint, or (from Go only) a go-sdk server in this process. Exactly
// one of Command, URL and Server is set.
type ServerConfig struct {
	// Name identifies the server; its tools are registered as
	// mcp__<name>__<tool>. Characters outside [A-Za-z0-9_-] become "_",
	// runs of "_" collapse and leading or trailing "_" are dropped; the
	// result must be 1–56 characters.
	Name string `toml:"name"`
	// Command is the program and its arguments for a stdio server, run
	// without a shell, in its own process group, e.g.
	// ["node", "/opt/mcp/server-filesystem/dist/index.js", "/srv/data"].
	Command []string `toml:"command"`
	// URL is the endpoint of a Streamable HTTP server (http or https).
	URL string `toml:"url"`
	// Server is a go-sdk server of the embedding program, spoken to over
	// mcp.NewInMemoryTransports: no process, no network. Its tools are
	// treated as any MCP server's (run alone, approval unless Trusted and
	// readOnlyHint, results capped), and a session that ends is reopened
	// like a dead server is restarted. Not settable from a configuration
	// file.
	Server *mcp.Server `toml:"-"`
	// AlwaysInArray puts the server's tools in every provider's tools
	// array (toolkit.Tool.AlwaysInArray), so a program's own in-process
	// tools are called directly under the default lazy policy. Not
	// settable from a configuration file.
	AlwaysInArray bool `toml:"-"`
	// Env adds variables to a stdio server's environment, which otherwise
	// holds only PATH, HOME and LANG (nothing else of ours leaks to it).
	Env map[string]string `toml:"env"`
	// Dir is a stdio server's working directory (default: ours).
	Dir string `toml:"dir"`
	// Headers are sent with every request to a Streamable HTTP server
	// (for example Authorization). Their values are never logged.
	Headers map[string]string `toml:"headers"`
	// Trusted lets the server's annotations count: a tool that declares
	// readOnlyHint runs without approval and makes nothing stale;
	// idempotentHint false on a tool that is not read-only makes every
	// call of it run (no de-duplication); destructiveHint is shown with
	// each confirmation. Every hint of an untrusted server is ignored: its
	// tools always need approval and count as writes.
	Trusted bool `toml:"trusted"`
	// Timeout of one tool call, as a duration string ("90s"); zero means
	// DefaultCallTimeout. The server is told when a call is abandoned
	// (notifications/cancelled).
	Timeout time.Duration `toml:"timeout"`
	// ConnectTimeout bounds start-up — the process's start, the initialize
	// handshake and the first listing of the tools, together — and each
	// later listing; zero means DefaultConnectTimeout. A server that does
	// not make it in time is marked failed and retried.
	ConnectTimeout time.Duration `toml:"connect_timeout"`
	// PingInterval is how often the session is pinged; a ping unanswered
	// within HangTimeout (PingInterval/2 when the hang check is off)
	// declares the server hung, as below. Zero means DefaultPingInterval,
	// a negative value turns these pings off.
	PingInterval time.Duration `toml:"ping_interval"`
	// MaxResultBytes caps the text of one tool result; longer results are
	// cut with a note. Zero means DefaultMaxResultBytes.
	MaxResultBytes int `toml:"max_result_bytes"`
	// HangTimeout: while calls wait on the server it is pinged every
	// HangTimeout/2; a ping not answered within HangTimeout declares the
	// server hung: nothing more is sent to it, it is killed and restarted,
	// and the waiting call ends outcome_unknown. While a ping is out no
	// call is sent; calls wait for its verdict, then for the replacement.
	// A stdio server a write to which waits HangTimeout (it reads nothing
	// more) is declared hung too.
	// Zero means DefaultHangTimeout, a negative value turns the check off.
	HangTimeout time.Duration `toml:"hang_timeout"`
	// NoDedup makes every call of the server's tools run, even a repeat of
	// one that succeeded in the run (toolkit.Tool.NoDedup): for servers
	// whose repeated calls are meant to act again.
	NoDedup bool `toml:"no_dedup"`
	// Concurrent lets the read-only tools (readOnlyHint) of a trusted
	// server run in parallel with other concurrent tools, under the
	// dispatcher's limit, instead of alone in call order. Without Trusted
	// it changes nothing.
	Concurrent bool `toml:"concurrent"`
	// OptionalTasks calls the tools whose listing says
	// execution.taskSupport "optional" as tasks too (polled, cancelled at
	// the timeout), as those saying "required" always are; otherwise they
	// are called plainly. Stdio and in-process servers only.
	OptionalTasks bool `toml:"optional_tasks"`
}

// DefaultHangTimeout is how long a server with calls waiting may leave a
// ping unanswered before it is declared hung.
const DefaultHangTimeout = 5 * time.Second

// Validate reports the first bad field of one server; the field is named
// relative to the server (command, url…).
func (s ServerConfig) Validate() error {
	name := SanitizeServerName(s.Name)
	switch {
	case strings.TrimSpace(s.Name) == "":
		return &ConfigError{Field: "name", Problem: "must not be empty"}
	case name == "":
		return &ConfigError{Field: "name", Problem: fmt.Sprintf("%q has no letter, digit, '-' or '_' to build a tool name from", s.Name)}
	case len(name) > maxServerName:
		return &ConfigError{Field: "name", Problem: fmt.Sprintf("%q is longer than %d characters once sanitised, leaving no room for tool names", s.Name, maxServerName)}
	case len(s.Command) > 0 && s.URL != "":
		return &ConfigError{Field: "url", Problem: "give command or url, not both"}
	case s.Server != nil && (len(s.Command) > 0 || s.URL != ""):
		return &ConfigError{Field: "server", Problem: "an in-process server takes no command or url"}
	case s.Server != nil:
		if len(s.Env) > 0 || s.Dir != "" || len(s.Headers) > 0 {
			return &ConfigError{Field: "server", Problem: "an in-process server has no environment, working directory or headers"}
		}
	case len(s.Command) == 0 && s.URL == "":
		return &ConfigError{Field: "command", Problem: "give command (a stdio server) or url (a Streamable HTTP server)"}
	case len(s.Command) > 0 && strings.TrimSpace(s.Command[0]) == "":
		return &ConfigError{Field: "command", Problem: "the program (first element) is empty"}
	case s.Timeout < 0:
		return &ConfigError{Field: "timeout", Problem: "must not be negative"}
	case s.ConnectTimeout < 0:
		return &ConfigError{Field: "connect_timeout", Problem: "must not be negative"}
	case s.MaxResultBytes < 0 || (s.MaxResultBytes > 0 && s.MaxResultBytes < minResultBytes):
		return &ConfigError{Field: "max_result_bytes", Problem: fmt.Sprintf("must be 0 (default) or at least %d", minResultBytes)}
	case len(s.Headers) > 0 && s.URL == "":
		return &ConfigError{Field: "headers", Problem: "only a url server sends headers"}
	case (len(s.Env) > 0 || s.Dir != "") && s.URL != "":
		field := "env"
		if s.Dir != "" {
			field = "dir"
		}
		return &ConfigError{Field: field, Problem: "only a command server has an environment and a working directory"}
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil {
			return &ConfigError{Field: "url", Problem: err.Error()}
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return &ConfigError{Field: "url", Problem: fmt.Sprintf("%q is not an http:// or https:// URL", s.URL)}
		}
		if _, err := hostform.URL(u); err != nil {
			return &ConfigError{Field: "url", Problem: err.Error()}
		}
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return &ConfigError{Field: "env", Problem: fmt.Sprintf("invalid variable name %q", k)}
		}
	}
	for k := range s.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n\x00") {
			return &ConfigError{Field: "headers", Problem: fmt.Sprintf("invalid header name %q", k)}
		}
	}
	return nil
}

// withDefaults fills in zero fields.
func (s ServerConfig) withDefaults() ServerConfig {
	if s.Timeout == 0 {
		s.Timeout = DefaultCallTimeout
	}
	if s.ConnectTimeout == 0 {
		s.ConnectTimeout = DefaultConnectTimeout
	}
	if s.PingInterval == 0 {
		s.PingInterval = DefaultPingInterval
	}
	if s.PingInterval < 0 {
		s.PingInterval = 0
	}
	if s.MaxResultBytes == 0 {
		s.MaxResultBytes = DefaultMaxResultBytes
	}
	if s.HangTimeout == 0 {
		s.HangTimeout = DefaultHangTimeout
	}
	if s.HangTimeout < 0 {
		s.HangTimeout = 0
	}
	return s
}

// ConfigError is a configuration mistake. Field names the bad field as it
// is written in the configuration file.
type ConfigError struct {
	Field   string
	Problem string
}

// Error returns "mcp: <field>: <problem>".
func (e *ConfigError) Error() string { return "mcp: " + e.Field + ": " + e.Problem }

// endpoint returns the URL of a Streamable HTTP server with its host in the
// one form the web tools dial (hostform).
func (s ServerConfig) endpoint() (*url.URL, error) {
	u, err := url.Parse(s.URL)
	if err != nil {
		return nil, &ConfigError{Field: "url", Problem: err.Error()}
	}
	if u, err = hostform.URL(u); err != nil {
		return nil, &ConfigError{Field: "url", Problem: err.Error()}
	}
	return u, nil
}
