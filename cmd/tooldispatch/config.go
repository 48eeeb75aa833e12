package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp"
	"github.com/tooldispatch/tooldispatch/toolkit/memory"
	"github.com/tooldispatch/tooldispatch/toolkit/sandbox"
	"github.com/tooldispatch/tooldispatch/toolkit/script"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
	"github.com/tooldispatch/tooldispatch/toolkit/web"
)

// fileConfig is the operator's configuration file (TOML), documented in
// docs/CONFIG.md. Only a file outside the workspace can trust tools: the
// repository being worked on cannot approve its own tools.
type fileConfig struct {
	// Web configures the outbound-request policy, search_web's backend and
	// public_api_list ([web]).
	Web web.Config `toml:"web"`
	// MCP lists MCP servers ([[mcp.servers]]).
	MCP mcp.Config `toml:"mcp"`
	// Script and Ext declare script_* and ext_* tools ([script], [ext]).
	Script script.ScriptConfig `toml:"script"`
	Ext    script.ExtConfig    `toml:"ext"`
	// Secrets: where the key of the encrypted secrets lives ([secrets]).
	Secrets secretsConfig `toml:"secrets"`
	// Chaos is a chaos-mode policy applied to every run ([chaos]); off
	// when absent. --chaos FILE overrides it.
	Chaos *chaos.Policy `toml:"chaos"`
	// Dispatcher holds defaults of the dispatcher ([dispatcher]).
	Dispatcher dispatcherConfig `toml:"dispatcher"`
	// Sandbox confines run_command and script tools ([sandbox]).
	Sandbox sandbox.Config `toml:"sandbox"`
	// Telemetry: OpenTelemetry traces over OTLP/HTTP ([telemetry]); off
	// when absent.
	Telemetry telemetryConfig `toml:"telemetry"`
	// Cluster: owner routing of serve --cluster ([cluster]).
	Cluster clusterConfig `toml:"cluster"`
	// Memory: who reads the error memory's records ([memory]).
	Memory memoryConfig `toml:"memory"`
	// Service: limits of serve ([service]).
	Service serviceConfig `toml:"service"`
	// Store: the data folder's free-space reserve ([store]).
	Store storeConfig `toml:"store"`
}

type serviceConfig struct {
	// MaxInFlightBytes bounds the bytes of request bodies in flight: past
	// it a request is answered 429 with Retry-After (default twice the
	// body limit, which is [dispatcher] max_turn_bytes plus 1 MiB).
	MaxInFlightBytes int64 `toml:"max_inflight_bytes"`
	// CertFile and KeyFile serve the service port over TLS (1.2 or later,
	// HTTPS): the certificate (PEM, the server's first, then any
	// intermediates) and its key (PEM). Both are read again by the first
	// handshake after either changes; a new pair that cannot be used keeps
	// the one in use, logged. Without them the port is plain HTTP.
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
}

// tlsFiles reports whether the service port is served over TLS.
func (c serviceConfig) tlsFiles() bool { return c.CertFile != "" }

// validate names the first bad key.
func (c serviceConfig) validate() error {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("service.cert_file and service.key_file go together: give both or neither")
	}
	return nil
}

type memoryConfig struct {
	// ErrorScope is which sessions read a write_error record (its
	// error_history and the past fixes quoted in a failed call's result):
	// "session" (default), only the session that wrote it, or "workspace",
	// every session of the workspace.
	ErrorScope memory.Scope `toml:"error_scope"`
}

type secretsConfig struct {
	// KeyFile is the AES-256 key file, created with mode 0600 when missing
	// (default: secret.key in the data directory). The environment variable
	// TOOLDISPATCH_SECRET_KEY (base64 of 32 bytes) takes precedence.
	KeyFile string `toml:"key_file"`
	// Bind lists the origins each secret may be sent to
	// ([[secrets.bind]] name, origins), besides those confirmed with
	// store_secret; a secret bound nowhere is sent nowhere.
	Bind []secretBinding `toml:"bind"`
}

// secretBinding is one [[secrets.bind]] entry.
type secretBinding struct {
	Name    string   `toml:"name"`
	Origins []string `toml:"origins"`
}

// validate names the first bad binding.
func (c secretsConfig) validate() error {
	for i, b := range c.Bind {
		if !secrets.ValidName(b.Name) {
			return fmt.Errorf("secrets.bind[%d].name %q is not a valid secret name", i, b.Name)
		}
		if len(b.Origins) == 0 {
			return fmt.Errorf("secrets.bind[%d] (%s) lists no origins", i, b.Name)
		}
		if _, err := secrets.ParseOrigins(b.Origins); err != nil {
			return fmt.Errorf("secrets.bind[%d].origins: %w", i, err)
		}
	}
	return nil
}

// bindSecrets applies the [[secrets.bind]] entries to s.
func (c secretsConfig) bindSecrets(s *secrets.Store) error {
	for _, b := range c.Bind {
		if err := s.Bind(b.Name, b.Origins...); err != nil {
			return err
		}
	}
	return nil
}

type dispatcherConfig struct {
	// MaxConcurrency: concurrent tools of one turn at once (default half
	// the cores, at least 3); --max-concurrency overrides it.
	MaxConcurrency int `toml:"max_concurrency"`
	// ConfirmTimeout: how long a confirmation waits (default 5m).
	ConfirmTimeout duration `toml:"confirm_timeout"`
	// AutoLoadSchemas runs a not-yet-fetched tool at once when its
	// arguments validate (saves a round trip).
	AutoLoadSchemas bool `toml:"auto_load_schemas"`
	// Confirm is how a call that needs approval waits in turns that do not
	// say: "block" (the default: the turn waits, up to confirm_timeout) or
	// "defer" (the call is committed awaiting_approval and answered later).
	Confirm string `toml:"confirm"`
	// Exclude lists tools no run may call.
	Exclude []string `toml:"exclude"`
	// Formats is the format policy of argument schemas: "assert" (default:
	// the formats in toolkit.AssertedFormats are checked, the rest are
	// annotations) or "annotate" (none is checked); the same for every draft.
	Formats toolkit.FormatPolicy `toml:"formats"`
	// PatternTimeout bounds one match of a schema pattern (default 200ms).
	PatternTimeout duration `toml:"pattern_timeout"`
	// PatternCallBudget bounds the pattern matching of one call (default
	// 1s), PatternTurnBudget that of all the calls of one turn (default 3s).
	PatternCallBudget duration `toml:"pattern_call_budget"`
	PatternTurnBudget duration `toml:"pattern_turn_budget"`
	// MaxTurnBytes bounds the arguments of one turn, all calls together,
	// on every route (default 64 MiB, at most 256 MiB); a run input value
	// or a request body may take 1 MiB more (actors.EncodedTurnLimit).
	MaxTurnBytes int `toml:"max_turn_bytes"`
	// MaxWaitingApprovals caps the deferred approvals kept waiting, every
	// session's together (default 100 000); a call that would wait past it
	// is committed skipped, saying why.
	MaxWaitingApprovals int64 `toml:"max_waiting_approvals"`
}

// maxTurnBytes is the turn limit of the configuration, its default filled
// in.
func (c dispatcherConfig) maxTurnBytes() int {
	return cmp.Or(c.MaxTurnBytes, actors.DefaultMaxTurnBytes)
}

// schemaOptions are the schema cache options of the configuration.
func (c dispatcherConfig) schemaOptions() []toolkit.SchemaOption {
	return []toolkit.SchemaOption{
		toolkit.WithFormatPolicy(cmp.Or(c.Formats, toolkit.FormatAssert)),
		toolkit.WithRegexTimeout(c.PatternTimeout.Duration),
		toolkit.WithMatchBudgets(c.PatternCallBudget.Duration, c.PatternTurnBudget.Duration),
	}
}

// duration is a time.Duration written "30s" in TOML.
type duration struct{ time.Duration }

func (d *duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	d.Duration = v
	return err
}

// configEnv names the configuration file when --config is not given.
const configEnv = "TOOLDISPATCH_CONFIG"

// loadConfig reads the configuration file (or none). A file inside the
// workspace loses every trust flag it sets, with a warning.
func loadConfig(file, workspace string, log zerolog.Logger) (*fileConfig, error) {
	cfg := &fileConfig{}
	if file == "" {
		file = os.Getenv(configEnv)
	}
	if file == "" {
		return cfg, nil
	}
	md, err := toml.DecodeFile(file, cfg)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", file, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		sort.Strings(keys)
		return nil, fmt.Errorf("config %s: unknown keys: %s", file, strings.Join(keys, ", "))
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("config %s: %w", file, err)
	}
	if inside(file, workspace) {
		log.Warn().Str("config", file).Msg("the configuration file is inside the workspace: its trust flags are ignored")
		for i := range cfg.MCP.Servers {
			cfg.MCP.Servers[i].Trusted = false
		}
		for i := range cfg.Script.Manifests {
			cfg.Script.Manifests[i].Trusted = false
		}
		for i := range cfg.Script.Tools {
			cfg.Script.Tools[i].ReadOnly = false
		}
		for i := range cfg.Ext.Tools {
			cfg.Ext.Tools[i].ReadOnly = false
		}
	}
	return cfg, nil
}

func (c *fileConfig) validate() error {
	var errs []error
	if err := c.Web.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Secrets.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.MCP.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := (script.Config{Script: c.Script, Ext: c.Ext}).Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Sandbox.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Chaos != nil {
		if err := c.Chaos.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("chaos: %w", err))
		}
	}
	if c.Dispatcher.Formats != "" {
		if err := c.Dispatcher.Formats.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("dispatcher.formats: %w", err))
		}
	}
	if c.Dispatcher.Confirm != "" && c.Dispatcher.Confirm != actors.ConfirmBlock && c.Dispatcher.Confirm != actors.ConfirmDefer {
		errs = append(errs, fmt.Errorf("dispatcher.confirm must be block or defer, got %q", messages.ClipText(c.Dispatcher.Confirm, 40)))
	}
	if c.Dispatcher.MaxTurnBytes < 0 {
		errs = append(errs, fmt.Errorf("dispatcher.max_turn_bytes must not be negative, got %d", c.Dispatcher.MaxTurnBytes))
	}
	if c.Dispatcher.MaxWaitingApprovals < 0 {
		errs = append(errs, fmt.Errorf("dispatcher.max_waiting_approvals must not be negative, got %d", c.Dispatcher.MaxWaitingApprovals))
	}
	if err := c.Service.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Service.MaxInFlightBytes < 0 {
		errs = append(errs, fmt.Errorf("service.max_inflight_bytes must not be negative, got %d", c.Service.MaxInFlightBytes))
	} else if m := c.Service.MaxInFlightBytes; m > 0 && m < actors.EncodedTurnLimit(c.Dispatcher.maxTurnBytes()) {
		errs = append(errs, fmt.Errorf("service.max_inflight_bytes (%d) is less than the largest request body (%d: [dispatcher] max_turn_bytes plus 1 MiB): the largest turn could never be admitted",
			m, actors.EncodedTurnLimit(c.Dispatcher.maxTurnBytes())))
	}
	if err := c.Memory.ErrorScope.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("memory.error_scope: %w", err))
	}
	if err := c.Telemetry.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Cluster.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Dispatcher.PatternTimeout.Duration < 0 {
		errs = append(errs, errors.New("dispatcher.pattern_timeout must not be negative"))
	}
	if c.Dispatcher.PatternCallBudget.Duration < 0 {
		errs = append(errs, errors.New("dispatcher.pattern_call_budget must not be negative"))
	}
	if c.Dispatcher.PatternTurnBudget.Duration < 0 {
		errs = append(errs, errors.New("dispatcher.pattern_turn_budget must not be negative"))
	}
	if c.Dispatcher.MaxConcurrency < 0 {
		errs = append(errs, errors.New("dispatcher.max_concurrency must not be negative"))
	}
	return errors.Join(errs...)
}

// inside reports whether file lies in dir (after resolving symlinks where
// possible).
func inside(file, dir string) bool {
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		if r, err := filepath.EvalSymlinks(a); err == nil {
			return r
		}
		return a
	}
	f, d := abs(file), abs(dir)
	rel, err := filepath.Rel(d, f)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
