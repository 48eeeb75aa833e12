// Package belt builds tooldispatch's full tool belt from a configuration:
// the meta tools, the built-in workspace tools, the web tools, secrets, the
// error memory, the interactive tools, script and ext tools and MCP
// servers, with the sandbox that run_command and script tools run in. The
// run, serve and tools commands build theirs with it; a program that embeds
// the dispatcher can too, and then register tools of its own beside them:
//
//	ws, _ := builtin.OpenWorkspace(dir)
//	reg := toolkit.NewRegistry()
//	b, err := belt.Register(reg, belt.Config{Workspace: ws, Store: store,
//		KeyFile: filepath.Join(dataDir, "secret.key")})
//	if err != nil { … }
//	defer b.Close()
//	d, err := actors.New(actors.Config{Registry: reg, Store: store,
//		Redactor: b.Secrets.Redactor(), PastFixes: b.Memory.PastFixes})
//
// The error memory is per session unless Config.ErrorScope shares it.
//
// File versions, secrets, the error memory and the web cache live in the
// store, so they outlast the process when the store does.
package belt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
	"github.com/tooldispatch/tooldispatch/toolkit/interact"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp"
	"github.com/tooldispatch/tooldispatch/toolkit/memory"
	"github.com/tooldispatch/tooldispatch/toolkit/sandbox"
	"github.com/tooldispatch/tooldispatch/toolkit/script"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
	"github.com/tooldispatch/tooldispatch/toolkit/web"
)

// MCPStartTimeout bounds how long Register waits for MCP servers to list
// their tools; a server still starting after it goes on starting in the
// background, and one that failed is marked failed (mcp.StateFailed).
const MCPStartTimeout = 30 * time.Second

// Config is what the tool belt is built from. Workspace and Store are
// required; the zero value of every other field is the default of the
// configuration file's matching section (docs/CONFIG.md).
type Config struct {
	// Workspace is the directory the workspace tools work in.
	Workspace *builtin.Workspace
	// Store keeps file versions, secrets, the error memory and the web
	// cache.
	Store cachestore.Store
	// Versions, when set, keeps the file versions instead of Store: a
	// cluster member keeps its own workspace's versions in its own store
	// while Store is the members' shared one.
	Versions cachestore.VersionStore
	// Shared says other processes write Store too (the members of a
	// cluster): secrets and the error memory then read through to it, so a
	// secret stored or an error recorded on one member is seen on all.
	Shared bool
	// KeyFile is the secrets' AES-256 key file, created with mode 0600 when
	// missing ([secrets] key_file).
	KeyFile string
	// SecretKey, when set, is the secrets' key (32 bytes, e.g.
	// secrets.SharedKey); KeyFile and TOOLDISPATCH_SECRET_KEY are then not
	// read.
	SecretKey []byte
	// Protected lists paths no sandboxed tool may read or change (the
	// data directory, the key file, the configuration file).
	Protected []string
	// Shell allows run_command's shell mode, a command line run by
	// /bin/sh -c (--shell).
	Shell bool
	// Sandbox confines run_command and script tools ([sandbox]).
	Sandbox sandbox.Config
	// Web configures the outbound-request policy and search ([web]).
	Web web.Config
	// Script and Ext declare script_* and ext_* tools ([script], [ext]).
	Script script.ScriptConfig
	Ext    script.ExtConfig
	// MCP lists MCP servers to start ([[mcp.servers]]).
	MCP mcp.Config
	// BindSecrets, when set, binds secrets to origins once the secrets are
	// open ([[secrets.bind]]).
	BindSecrets func(*secrets.Store) error
	// Exclude lists tools the operator excluded: test_tool refuses them.
	Exclude []string
	// ErrorScope is which sessions read an error record ([memory]
	// error_scope); default memory.ScopeSession.
	ErrorScope memory.Scope
	// Observer receives the web tools' measurements; may be nil.
	Observer toolkit.Observer
	// Logger receives the tools' logs.
	Logger zerolog.Logger
}

// Belt is a registered tool belt and what it holds open.
type Belt struct {
	Registry *toolkit.Registry
	// Secrets is the encrypted secrets store; its Redactor belongs in
	// actors.Config.Redactor.
	Secrets *secrets.Store
	// Memory is the error memory; its PastFixes belongs in
	// actors.Config.PastFixes.
	Memory  *memory.Memory
	Web     *web.Web
	MCP     *mcp.Manager // nil without MCP servers
	Sandbox *sandbox.Sandbox
}

// Register fills reg with the whole tool belt of c and starts its MCP
// servers (waiting up to MCPStartTimeout). An MCP server that fails is no
// error of Register: Belt.MCP.Servers reports it. On an error, what was
// opened is closed again.
func Register(reg *toolkit.Registry, c Config) (*Belt, error) {
	if c.Workspace == nil || c.Store == nil {
		return nil, errors.New("belt: Config.Workspace and Config.Store are required")
	}
	if err := c.ErrorScope.Validate(); err != nil {
		return nil, fmt.Errorf("belt: Config.ErrorScope: %w", err)
	}
	log := c.Logger
	ws := c.Workspace
	b := &Belt{Registry: reg}
	var versions builtin.VersionStore = c.Store
	if c.Versions != nil {
		versions = c.Versions
	}
	toolkit.RegisterMeta(reg)
	sb, err := sandbox.New(c.Sandbox, sandbox.Options{Workspace: ws.Dir(),
		Protected: append(slices.Clone(c.Protected), ws.MarkedDirs()...), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("the sandbox: %w", err)
	}
	b.Sandbox = sb
	builtin.Register(reg, builtin.Deps{Workspace: ws, Versions: versions, Shell: c.Shell, Sandbox: sb, Logger: log})
	sec, err := secrets.OpenWith(c.Store, secrets.Options{Key: c.SecretKey, KeyFile: c.KeyFile, Shared: c.Shared, Logger: log})
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("opening the secrets: %w", err)
	}
	b.Secrets = sec
	if c.BindSecrets != nil {
		if err := c.BindSecrets(sec); err != nil {
			b.Close()
			return nil, fmt.Errorf("binding the secrets: %w", err)
		}
	}
	reg.Register(secrets.StoreSecretTool(sec))
	b.Web = web.Register(reg, web.Deps{Config: c.Web, Cache: web.CacheFromStore(c.Store), Secrets: sec,
		Workspace: ws, Observer: c.Observer, Logger: log})
	memOpts := []memory.Option{memory.WithScope(c.ErrorScope)}
	if c.Shared {
		memOpts = append(memOpts, memory.Shared())
	}
	b.Memory = memory.New(c.Store, ws.Dir(), memOpts...)
	b.Memory.Register(reg)
	interact.Register(reg, interact.Deps{Workspace: ws, Versions: versions})
	regd, err := script.Register(reg, script.Config{Script: c.Script, Ext: c.Ext, Sandbox: sb}, ws.Dir(), log)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("script tools: %w", err)
	}
	examples := map[string]*interact.Example{}
	for _, r := range regd {
		if r.Example != nil {
			examples[r.Name] = &interact.Example{Tool: r.Name, Arguments: r.Example}
		}
	}
	exclude := slices.Clone(c.Exclude)
	reg.Register(interact.TestTool(reg, func(name string) (*toolkit.Tool, *interact.Example, bool) {
		if slices.Contains(exclude, name) {
			return nil, nil, false // the operator excluded it: no way to run it
		}
		t, ok := reg.Lookup(name)
		return t, examples[name], ok
	}))
	if len(c.MCP.Servers) > 0 {
		b.MCP = mcp.NewManager(reg, c.MCP.Servers, log, mcp.WithRedactor(sec.Redactor()))
		ctx, cancel := context.WithTimeout(context.Background(), MCPStartTimeout)
		err := b.MCP.Start(ctx)
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			// A server that fails is marked failed, and one still
			// starting registers its tools once up: neither stops the
			// rest of the belt.
			log.Warn().Dur("waited", MCPStartTimeout).Msg("MCP servers still starting; their tools are registered once they are up")
		case err != nil:
			b.Close()
			return nil, fmt.Errorf("starting MCP servers: %w", err)
		}
	}
	return b, nil
}

// Close stops MCP servers, shared web executions and the sandbox.
func (b *Belt) Close() {
	if b.MCP != nil {
		_ = b.MCP.Close()
	}
	if b.Web != nil {
		b.Web.Close()
	}
	if b.Sandbox != nil {
		_ = b.Sandbox.Close()
	}
}
