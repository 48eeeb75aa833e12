package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	tdcluster "github.com/tooldispatch/tooldispatch/actors/cluster"
	"github.com/tooldispatch/tooldispatch/belt"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/cachestore/space"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/service"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp"
)

const (
	// dataDirMode is the mode of a data directory the command creates: it
	// holds sessions and file versions, which are nobody else's business.
	dataDirMode os.FileMode = 0o700
	// closeGrace is how long closing waits for turns still running before
	// it cancels them.
	closeGrace = 10 * time.Second
)

// newLogger returns the logger of one invocation: human-readable lines on
// w at level and above.
func newLogger(w io.Writer, level zerolog.Level) zerolog.Logger {
	cw := zerolog.ConsoleWriter{Out: w, NoColor: true, TimeFormat: time.RFC3339}
	return zerolog.New(cw).Level(level).With().Timestamp().Logger()
}

// openWorkspace opens the --workspace directory, keeping its tools away
// from the protected paths (tooldispatch's own files, see ownFiles). A
// missing directory is a usage error.
func openWorkspace(dir string, protected ...string) (*builtin.Workspace, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, failf(exitUsage, "--workspace: %v", err)
	}
	if !fi.IsDir() {
		return nil, failf(exitUsage, "--workspace %s is not a directory", dir)
	}
	ws, err := builtin.OpenWorkspace(dir, builtin.WithProtected(protected...))
	if err != nil {
		return nil, failf(exitUsage, "--workspace: %v", err)
	}
	return ws, nil
}

// ownFiles are tooldispatch's own paths, which no tool may read, list or
// change, wherever they lie: the data directory, the secrets' key file,
// the operator's configuration file, serve's token and PostgreSQL URL
// files, and the certificates and keys of the cluster and of the service
// port (a tool that could replace the service's would have the next
// connection served with its own).
func ownFiles(o *options, cfg *fileConfig) []string {
	config := o.config
	if config == "" {
		config = os.Getenv(configEnv)
	}
	own := []string{o.data, keyFilePath(cfg, o.data), config, o.tokenFile, o.postgresFile}
	if cfg.Cluster.tlsFiles() {
		own = append(own, cfg.Cluster.CAFile, cfg.Cluster.CertFile, cfg.Cluster.KeyFile)
	}
	if cfg.Service.tlsFiles() {
		own = append(own, cfg.Service.CertFile, cfg.Service.KeyFile)
	}
	return own
}

// keyFilePath is the file of the secrets' key: [secrets] key_file, or
// secret.key in the data directory.
func keyFilePath(cfg *fileConfig, dataDir string) string {
	if cfg.Secrets.KeyFile != "" {
		return cfg.Secrets.KeyFile
	}
	return filepath.Join(dataDir, "secret.key")
}

// toolset is every tool of an invocation and what they need closed.
type toolset = belt.Belt

// registerTools fills reg with the tool belt of the configuration
// (belt.Register): the meta tools, the built-in tools, the web tools,
// secrets, the error memory, the interactive tools, MCP servers and
// script/ext tools.
func registerTools(reg *toolkit.Registry, ws *builtin.Workspace, store cachestore.Store, dataDir string, o *options,
	cfg *fileConfig, observer toolkit.Observer, log zerolog.Logger) (*toolset, error) {
	return belt.Register(reg, beltConfig(ws, store, dataDir, o, cfg, observer, log))
}

// beltConfig is the tool belt's configuration of an invocation.
func beltConfig(ws *builtin.Workspace, store cachestore.Store, dataDir string, o *options,
	cfg *fileConfig, observer toolkit.Observer, log zerolog.Logger) belt.Config {
	return belt.Config{
		Workspace: ws, Store: store, KeyFile: keyFilePath(cfg, dataDir), Protected: ownFiles(o, cfg),
		Shell: o.shell, Sandbox: cfg.Sandbox, Web: cfg.Web, Script: cfg.Script, Ext: cfg.Ext, MCP: cfg.MCP,
		BindSecrets: cfg.Secrets.bindSecrets, Exclude: cfg.Dispatcher.Exclude, ErrorScope: cfg.Memory.ErrorScope,
		Observer: observer, Logger: log,
	}
}

// openStore opens the Badger store in dir, creating the directory when
// create is set, and records this process as its holder (holder.go) until
// Close. A store another process holds fails with a *storeHeldError that
// names that process.
func openStore(dir string, create, fsync bool, log zerolog.Logger) (*heldStore, error) {
	if create {
		if err := os.MkdirAll(dir, dataDirMode); err != nil {
			return nil, fmt.Errorf("creating the data directory: %w", err)
		}
	}
	last := &lastStoreError{}
	b, err := badger.Open(storeOptions(dir, fsync, log.Hook(last)))
	if err != nil {
		if isLocked(err) {
			return nil, heldError(dir, err)
		}
		return nil, err
	}
	if err := writeHolder(dir, holderRecord{PID: os.Getpid(), Command: commandLine()}); err != nil {
		log.Warn().Err(err).Msg("recording this process as the holder of the store")
	}
	return &heldStore{Store: b, dir: dir, lastErr: last}, nil
}

// stack is what run works with: the workspace, the store, the registry and
// the dispatcher, opened in that order and closed in reverse.
type stack struct {
	ws      *builtin.Workspace
	store   cachestore.Store // held, behind the free-space guard
	held    *heldStore
	space   *space.Guard  // nil when --min-free is 0
	chaos   *storageChaos // nil without storage faults in the chaos policy
	stages  shutdownStages
	reg     *toolkit.Registry
	tools   *toolset
	cfg     *fileConfig
	disp    *actors.Dispatcher
	member  *tdcluster.Member // serve --cluster only
	metrics *service.Metrics  // serve only
	// stopTelemetry flushes the spans not yet sent.
	stopTelemetry func(context.Context) error
}

// openStack opens everything run needs. events receives the dispatcher's
// events (it must not block).
func openStack(o *options, log zerolog.Logger, events func(*messages.Event)) (_ *stack, err error) {
	// The configuration comes first: it names the key file, one of the
	// paths the workspace keeps its tools away from.
	cfg, err := loadConfig(o.config, o.workspace, log)
	if err != nil {
		return nil, failf(exitUsage, "%v", err)
	}
	ws, err := openWorkspace(o.workspace, ownFiles(o, cfg)...)
	if err != nil {
		return nil, err
	}
	s := &stack{ws: ws}
	// One cleanup for every failure below: what was opened is closed.
	defer func() {
		if err != nil {
			s.close(log)
		}
	}()
	policy := cfg.Chaos
	if o.chaos != "" {
		if policy, err = chaos.Load(o.chaos); err != nil {
			return nil, failf(exitUsage, "--chaos: %v", err)
		}
	}
	bc, co, err := s.openStores(o, cfg, policy, log)
	if err != nil {
		return nil, err
	}
	observer, err := s.registerTools(o, cfg, bc, log)
	if err != nil {
		return nil, err
	}
	s.chaos.setMetrics(s.metrics)
	if err := s.recoverTasks(log); err != nil {
		return nil, err
	}
	s.cfg = cfg
	acfg := dispatcherSettings(o, cfg)
	acfg.Observer = observer
	acfg.Registry = s.reg
	// The store the dispatcher writes through: the member's Split in a
	// cluster, the local store otherwise, wrapped in both (tests).
	acfg.Store = s.store
	if o.wrapStore != nil {
		acfg.Store = o.wrapStore(s.store)
	}
	acfg.Logger = log
	acfg.Events = events
	acfg.NobodyAnswers = o.nobodyAnswers
	acfg.Redactor = s.tools.Secrets.Redactor()
	acfg.PastFixes = s.tools.Memory.PastFixes
	acfg.Chaos = policy
	if err = s.startDispatcher(o, cfg, acfg, co); err != nil {
		return nil, err
	}
	// Every secret of the environment is read by now (the key, the
	// PostgreSQL URL and password, the exporter's headers; serve's token
	// before): nothing started from here on inherits them.
	forgetSecretEnv()
	return s, nil
}

// openStores opens the local store and, for a cluster member, the shared
// one before the tools (their secrets and error memory live there, so
// that every member sees them: clusterTools); it returns the tools'
// configuration and the cluster's options. s.store is what the
// dispatcher writes through: behind the chaos policy's storage faults,
// when it has any, as is the store the tools write.
func (s *stack) openStores(o *options, cfg *fileConfig, policy *chaos.Policy, log zerolog.Logger) (*belt.Config, tdcluster.Options, error) {
	var co tdcluster.Options
	held, err := openStore(o.data, true, o.fsync, log)
	if err != nil {
		return nil, co, failf(exitFailure, "opening the store in %s: %v", o.data, err)
	}
	// Every write of the store, the tools' included, keeps the data
	// folder's free-space reserve.
	s.held, s.store = held, held
	if s.space, err = spaceGuard(o, cfg, log); err != nil {
		return nil, co, failf(exitUsage, "--min-free: %v", err)
	}
	if s.space != nil {
		s.store = s.space.Wrap(held)
	}
	if s.chaos, err = newStorageChaos(policy, o.data, log); err != nil {
		return nil, co, failf(exitFailure, "%v", err)
	}
	store := s.store
	if o.clusterName == "" {
		s.store = s.chaos.wrap(store)
		bc := beltConfig(s.ws, s.store, o.data, o, cfg, nil, log)
		return &bc, co, nil
	}
	bc := beltConfig(s.ws, store, o.data, o, cfg, nil, log)
	if _, err := postgresURL(o); err != nil {
		return nil, co, failf(exitUsage, "%v", err)
	}
	if co, err = clusterOptions(o, cfg, log); err != nil {
		if errors.Is(err, errEtcdUnreachable) {
			return nil, co, failf(exitFailure, "%v", err)
		}
		return nil, co, failf(exitUsage, "%v", err)
	}
	shared, err := clusterStore(o, store, log)
	if err != nil {
		return nil, co, failf(exitFailure, "%v", err)
	}
	s.store = shared
	if err := clusterTools(&bc, shared, store, cfg, log); err != nil {
		return nil, co, failf(exitFailure, "%v", err)
	}
	// The member writes its turns and the tools' records to the shared
	// store: the faults are injected there.
	s.store = s.chaos.wrap(shared)
	bc.Store = s.store
	return &bc, co, nil
}

// registerTools registers the tool belt and checks the configuration's
// exclusions against it; it returns serve's metrics as the observer (nil
// for the other commands).
func (s *stack) registerTools(o *options, cfg *fileConfig, bc *belt.Config, log zerolog.Logger) (toolkit.Observer, error) {
	s.reg = toolkit.NewRegistry(cfg.Dispatcher.schemaOptions()...)
	var observer toolkit.Observer
	if o.cmd == "serve" {
		s.metrics = service.NewMetrics(s.reg)
		observer = s.metrics
	}
	bc.Observer = observer
	// File versions, secrets and the error memory live in the store, so
	// they outlast the invocation.
	var err error
	if s.tools, err = belt.Register(s.reg, *bc); err != nil {
		if o.clusterName != "" {
			err = clusterKeyError(err, cfg)
		}
		return nil, failf(exitFailure, "%v", err)
	}
	if err := checkExclude(s.reg, cfg.Dispatcher.Exclude, log); err != nil {
		return nil, failf(exitUsage, "%v", err)
	}
	return observer, nil
}

// recoverTasks gives the stores the lookup of the tasks that interrupted
// calls ran as (MCP tasks), now that the MCP servers are up, and resolves
// the intents the store's opening left for it. A cluster member's shared
// store resolves its sessions' intents when their grains activate
// (LoadSession), with the same lookup.
func (s *stack) recoverTasks(log zerolog.Logger) error {
	resume := func(_ context.Context, taskID string, _ time.Time, c *toolkit.Call) (toolkit.Result, error) {
		return toolkit.Result{}, fmt.Errorf("no MCP server is configured, so task %q of %s could not be asked about: %w",
			messages.ClipText(taskID, 128), c.Name, toolkit.ErrOutcomeUnknown)
	}
	if s.tools.MCP != nil {
		resume = s.tools.MCP.ResumeTask
	}
	lookup := actors.TaskLookup(resume, s.tools.Secrets.Redactor(), log)
	s.held.SetTaskLookup(lookup)
	if r, ok := s.store.(cachestore.TaskResolver); ok {
		r.SetTaskLookup(lookup)
	}
	n, err := s.held.RecoverAll(context.Background())
	if err != nil {
		return failf(exitFailure, "resolving the turns that MCP tasks interrupted: %v", err)
	}
	if n > 0 {
		log.Info().Int("turns", n).Msg("resolved interrupted turns whose calls ran as MCP tasks")
	}
	return nil
}

// startDispatcher starts telemetry and the dispatcher: a cluster member's
// or the process's own.
func (s *stack) startDispatcher(o *options, cfg *fileConfig, acfg actors.Config, co tdcluster.Options) error {
	instance := ""
	if o.clusterName != "" {
		instance = o.clusterAddr
	}
	var err error
	acfg.Tracer, s.stopTelemetry, err = startTelemetry(cfg.Telemetry, instance)
	if err != nil {
		return failf(exitUsage, "[telemetry]: %v", err)
	}
	if o.clusterName != "" {
		if s.member, err = tdcluster.Join(acfg, co); err == nil {
			s.disp = s.member.Dispatcher
		}
	} else {
		s.disp, err = actors.New(acfg)
	}
	if err != nil {
		return failf(exitFailure, "starting the dispatcher: %v", err)
	}
	return nil
}

// dispatcherSettings returns the dispatcher settings the flags and the
// configuration file decide: a flag wins over the file's [dispatcher] key.
// --approve is the most any turn gets (SPEC §16); when absent, ask (run
// lowers it further to none when no terminal can be asked on).
func dispatcherSettings(o *options, cfg *fileConfig) actors.Config {
	c := actors.Config{
		MaxConcurrency: cmp.Or(o.maxConcurrency, cfg.Dispatcher.MaxConcurrency),
		ConfirmTimeout: cmp.Or(o.confirmTimeout, cfg.Dispatcher.ConfirmTimeout.Duration),
		MaxApprove:     cmp.Or(o.approve, actors.ApproveAsk),
		ApproveHints:   approveHints[o.cmd],
		Exclude:        slices.Clone(cfg.Dispatcher.Exclude),
		MaxTurnBytes:   cfg.Dispatcher.MaxTurnBytes,
		Confirm:        cfg.Dispatcher.Confirm,

		MaxWaitingApprovals: cfg.Dispatcher.MaxWaitingApprovals,
	}
	return c
}

// approveHints are what a call skipped for want of approval tells to set,
// per command: the flags and fields a person uses there.
var approveHints = map[string]actors.ApproveHints{
	"run": {
		Turn:    `run with --approve all, or with --approve ask on a terminal (without one the default is none); an envelope's "approve" may lower it, never raise it`,
		Ceiling: `run was given --approve none; give --approve ask (asked on a terminal) or --approve all`,
	},
	"serve": {
		Turn:    `send "approve":"ask" or "all" in the request body, or leave it out to get serve's --approve`,
		Ceiling: `serve was started with --approve none; start it with --approve ask (the default, answered over the API or the page) or --approve all`,
	},
}

// checkExclude refuses a [dispatcher] exclude name that is no registered
// tool: a misspelt name would exclude nothing. MCP tools may appear after
// start-up, so an unknown mcp__ name is only warned about.
func checkExclude(reg *toolkit.Registry, exclude []string, log zerolog.Logger) error {
	for _, name := range exclude {
		if _, ok := reg.Lookup(name); ok {
			continue
		}
		if mcp.IsToolName(name) {
			log.Warn().Str("tool", name).Msg("dispatcher.exclude names a tool no MCP server offers yet")
			continue
		}
		var names []string
		for _, t := range reg.All() {
			names = append(names, t.Name)
		}
		msg := fmt.Sprintf("dispatcher.exclude: no tool is named %q", name)
		if near := toolkit.Closest(name, names, 3); len(near) > 0 {
			msg += "; did you mean " + strings.Join(near, ", ") + "?"
		}
		return errors.New(msg)
	}
	return nil
}

// close stops the dispatcher (waiting up to closeGrace for running turns),
// then closes the store and the workspace. Failures are logged: by then the
// results are written.
func (s *stack) close(log zerolog.Logger) error {
	var errs []error
	if s.disp != nil {
		s.stages.set("closing the dispatcher")
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		if err := s.disp.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("closing the dispatcher: %w", err))
		}
		cancel()
	}
	if s.stopTelemetry != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		if err := s.stopTelemetry(ctx); err != nil {
			log.Warn().Err(err).Msg("sending the last spans")
		}
		cancel()
	}
	if s.tools != nil {
		s.tools.Close()
	}
	if s.store != nil {
		s.stages.set("closing the store")
		switch err := closeWithin(closeGrace, s.store.Close); {
		case errors.Is(err, errStoreStuck):
			errs = append(errs, fmt.Errorf("the store in %s did not close within %s: %s: %w", s.held.dir, closeGrace, s.stuckReason(), err))
		case err != nil:
			errs = append(errs, fmt.Errorf("closing the store: %w", err))
		}
	}
	if err := s.chaos.close(); err != nil {
		errs = append(errs, fmt.Errorf("closing chaos mode's storage-fault log: %w", err))
	}
	if s.ws != nil {
		if err := s.ws.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the workspace: %w", err))
		}
	}
	err := errors.Join(errs...)
	if err != nil {
		log.Error().Err(err).Msg("shutting down")
	}
	return err
}
