package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Flag defaults.
const (
	defaultProvider = "openai"
	defaultSession  = "default"
	defaultLogLevel = "warn"
	// dataDirName is the data directory inside the workspace that earlier
	// versions used by default; the file tools still refuse it. The default
	// is now outside the workspace (defaultDataDir).
	dataDirName = ".tooldispatch"
	// defaultAddr is where serve listens.
	defaultAddr = "127.0.0.1:8723"
	// defaultGrace is how long serve lets running turns finish on shutdown.
	defaultGrace = 30 * time.Second
	// maxIDLen is the longest session, run or turn id the dispatcher takes.
	maxIDLen = 256
)

// options are the parsed flags of one command.
type options struct {
	// nobodyAnswers: no person answers questions (run), set by the
	// command, not a flag.
	nobodyAnswers bool
	cmd           string

	// common flags
	workspace      string // absolute
	data           string // absolute
	provider       string
	approve        string // "ask", "all", "none", or "" for the terminal default
	maxConcurrency int
	session        string
	run            string // generated per invocation when not given
	logLevel       zerolog.Level
	shell          bool
	config         string   // the operator's configuration file
	chaos          string   // a chaos policy file (run, serve)
	minFree        byteSize // the data folder's free-space reserve (run, serve)

	// run
	pretty         autoBool
	events         bool
	openAIStrict   bool // pure OpenAI tool messages
	fsync          bool
	confirmTimeout time.Duration

	// tools
	all             bool
	toolsFormat     toolkit.ToolsFormat
	toolsFormatFlag string

	// chaos plan / report
	firstTurn int64
	json      bool
	runGiven  bool // --run was given

	// serve --cluster
	clusterName    string
	clusterAddr    string
	peers          string
	automanagePort int
	etcd           string
	postgres       string
	postgresFile   string
	redirect       bool
	serviceURL     string

	// serve
	addr         string
	token        string
	tokenFile    string
	allowOrigins string
	grace        time.Duration

	// args are the positional arguments.
	args []string

	// wrapStore is env.wrapStore.
	wrapStore func(cachestore.Store) cachestore.Store
}

// commandUsage is the first line of each command's help.
var commandUsage = map[string]string{
	"run":          "run [flags] [FILE|-]\n\nDispatch the turns read from FILE (stdin when absent or -) and print events\nand results as JSON Lines.",
	"tools":        "tools [flags]\n\nPrint the tools array and the turn-context text --provider gets at the start\nof a run, or with --all every registered tool with its schema and flags.",
	"session":      "session [flags]\n\nPrint the persisted session --session: {\"tools\":[…],\"tool_histories\":[…]}.\nExit status 1 when the data directory holds no such session (the message lists those it holds).",
	"chaos-plan":   "chaos plan --chaos FILE [flags] [TURNS|-]\n\nPrint the faults the policy injects into the turns of TURNS, before running them.",
	"chaos-report": "chaos report [flags]\n\nList each injected fault of a session and what the agent did on its next turn.",
	"serve":        "serve [flags]\n\nServe the HTTP API, the live event streams, the operator page at / and\n/metrics (README.md, \"The service\").",
}

// flagCommands are the commands that parse flags, in the order a flag's
// commands are named.
var flagCommands = []string{"run", "tools", "session", "serve", "chaos-plan", "chaos-report"}

// flagVars are flag values that finish turns into options.
type flagVars struct {
	workspace, data, logLevel string
}

// approveUsage is --approve's help, per command: run and serve default
// differently.
var approveUsage = map[string]string{
	"run": "the most a turn may get for calls that change things: `ask|all|none` (default: ask when stdin or\n" +
		"/dev/tty is a terminal, none otherwise); a turn's approve may lower it, never raise it",
	"serve": "the most a turn may get for calls that change things: `ask|all|none` (default ask: answered\n" +
		"over the API or on the operator page); a request body's approve may lower it, never raise it",
}

// defineFlags defines on fs the flags cmd takes, writing into o and v.
func defineFlags(fs *flag.FlagSet, cmd string, o *options, v *flagVars) {
	// Each command takes only the common flags it uses.
	uses := func(cmds ...string) bool { return slices.Contains(cmds, cmd) }
	switch {
	case uses("run", "tools", "serve"):
		fs.StringVar(&v.workspace, "workspace", "", "root `DIR` of every file tool and of run_command (default: the current directory)")
	case uses("session", "chaos-report"):
		fs.StringVar(&v.workspace, "workspace", "", "the workspace `DIR` whose default data directory to read (default: the current directory)")
	}
	if uses("run", "session", "serve", "chaos-report") {
		fs.StringVar(&v.data, "data", "", "Badger data `DIR` and secret key (default: $XDG_STATE_HOME or ~/.local/state, then "+stateDirName+"/NAME-HASH for the workspace)")
	}
	if uses("run", "tools") {
		fs.StringVar(&o.provider, "provider", defaultProvider, "model family the turns come from: claude-code, or any other `NAME`")
	}
	if uses("run", "serve") {
		fs.Var(&o.minFree, "min-free", "keep `SIZE` free on the data folder's disk (e.g. 64MiB): below it new turns are refused (serve 507,\n"+
			"run exit 4), reads go on; 0 turns the check off (default: what the store may still write into its files, 20MiB)")
		fs.StringVar(&o.approve, "approve", "", approveUsage[cmd])
		fs.IntVar(&o.maxConcurrency, "max-concurrency", 0, "run at most `N` concurrent tools of a turn at once (default: half the CPU cores, at least 3)")
	}
	if uses("run", "session", "chaos-report") {
		fs.StringVar(&o.session, "session", defaultSession, "session `ID`")
	}
	if uses("run", "chaos-plan", "chaos-report") {
		fs.StringVar(&o.run, "run", "", "run `ID`; turns of a run share de-duplication (default: one new run per invocation)")
	}
	if !uses("chaos-plan") {
		fs.StringVar(&v.logLevel, "log-level", defaultLogLevel, "log `LEVEL` on stderr: trace, debug, info, warn, error or disabled")
	}
	if uses("run", "tools", "serve") {
		fs.BoolVar(&o.shell, "shell", false, "allow run_command's shell mode (a command line run by /bin/sh -c)")
		fs.StringVar(&o.config, "config", "", "the operator's configuration `FILE`, TOML, see docs/CONFIG.md (default $"+configEnv+")")
	}
	switch cmd {
	case "run":
		fs.BoolVar(&o.events, "events", true, "print every event before the results")
		fs.Var(&o.pretty, "pretty", "print for people: one line per result (turn, call id, tool, status, first line of content),\nevents indented (default: when stdout is a terminal; --pretty=false prints JSON Lines)")
		fs.BoolVar(&o.openAIStrict, "openai-strict", false, "print pure OpenAI tool messages (role, tool_call_id, content only); the statuses stay in the events")
		fs.BoolVar(&o.fsync, "fsync", false, "fsync every commit, so committed turns survive a power loss")
		fs.DurationVar(&o.confirmTimeout, "confirm-timeout", 0, "wait at most `DURATION` (e.g. 30s) for the answer to a confirmation, then skip the call (default 5m)")
		fs.StringVar(&o.chaos, "chaos", "", "inject faults by the chaos policy `FILE` (TOML or JSON); see examples/chaos.toml")
	case "chaos-plan":
		fs.StringVar(&o.chaos, "chaos", "", "the chaos policy `FILE` (TOML or JSON)")
		fs.Int64Var(&o.firstTurn, "first-turn", 1, "the session's turn `N` the first turn of the input will get")
	case "chaos-report":
		fs.BoolVar(&o.json, "json", false, "print JSON Lines instead of a table")
	case "tools":
		fs.BoolVar(&o.all, "all", false, "print every registered tool with its full schema and flags")
		fs.StringVar(&o.toolsFormatFlag, "format", "openai", "the tools array's `FORMAT`: openai, openai-strict, responses, anthropic or gemini\n(schemas converted to what the provider accepts; those that cannot be are listed as refused)")
	case "serve":
		fs.StringVar(&o.addr, "addr", defaultAddr, "listen on `ADDR`; anything but loopback needs a token (--token-file or $"+tokenEnv+")")
		fs.StringVar(&o.token, "token", "", "bearer `TOKEN` every request needs; every local user can see it in the process list: prefer --token-file or $"+tokenEnv)
		fs.StringVar(&o.tokenFile, "token-file", "", "read the bearer token from `FILE` (default $"+tokenEnv+")")
		fs.StringVar(&o.allowOrigins, "allow-origin", "", "comma-separated `ORIGINS` allowed by CORS (default: none)")
		fs.BoolVar(&o.fsync, "fsync", false, "fsync every commit, so committed turns survive a power loss")
		fs.DurationVar(&o.confirmTimeout, "confirm-timeout", 0, "wait at most `DURATION` for the answer to a confirmation, then skip the call (default 5m)")
		fs.StringVar(&o.chaos, "chaos", "", "inject faults by the chaos policy `FILE` (TOML or JSON); see examples/chaos.toml")
		fs.StringVar(&o.clusterName, "cluster", "", "join the protoactor cluster `NAME`: sessions become grains over a shared PostgreSQL store")
		fs.StringVar(&o.clusterAddr, "cluster-addr", "127.0.0.1:0", "`HOST:PORT` of this member's cluster endpoint")
		fs.StringVar(&o.peers, "peers", "", "static membership: comma-separated `HOST:PORT` list of every member's --automanage-port")
		fs.IntVar(&o.automanagePort, "automanage-port", 0, "`PORT` this member answers static-membership checks on (on the --cluster-addr host, over [cluster] mutual TLS)")
		fs.StringVar(&o.etcd, "etcd", "", "membership through etcd: comma-separated `ENDPOINTS`")
		fs.StringVar(&o.postgres, "postgres", "", "the cluster's shared store: PostgreSQL `URL`; every local user can see it in the process list: prefer --postgres-file or $"+postgresEnv)
		fs.StringVar(&o.postgresFile, "postgres-file", "", "read the cluster's PostgreSQL URL from `FILE` (default $"+postgresEnv+")")
		fs.StringVar(&o.serviceURL, "service-url", "", "`URL` other members name to clients as this member's address (default http://ADDR as listened on)")
		fs.BoolVar(&o.redirect, "redirect", false, "answer a request for a session another member owns with 307 to the owner instead of forwarding it")
		fs.DurationVar(&o.grace, "grace", defaultGrace, "on SIGTERM/SIGINT, let running turns finish for `DURATION`, then cancel them")
	}
}

// parseFlags parses the flags of cmd. Errors are exitErrors with status 2,
// or 0 when help was asked for. Help goes to stdout with the usage; a
// mistake is one line on stderr that says what was wrong (for an unknown
// flag, the closest flag of cmd or the commands that take it) and where
// the flags are listed.
func (e *env) parseFlags(cmd string, args []string) (*options, error) {
	o := &options{cmd: cmd, wrapStore: e.wrapStore, provider: defaultProvider, session: defaultSession}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	// The flag package's own messages are replaced by ours: its output
	// is kept only for the help that was asked for.
	var parseOut bytes.Buffer
	fs.SetOutput(&parseOut)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tooldispatch %s\n\nFlags:\n", commandUsage[cmd])
		printFlags(fs)
	}
	v := flagVars{logLevel: defaultLogLevel}
	defineFlags(fs, cmd, o, &v)

	rest, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		if _, err := e.stdout.Write(parseOut.Bytes()); err != nil {
			return nil, writeOut(err)
		}
		return nil, &exitError{code: exitOK}
	}
	if err != nil {
		return nil, e.usageMistake(cmd, flagMistake(fs, cmd, err))
	}
	o.args = rest
	o.runGiven = o.run != ""
	if err := o.finish(e, v.workspace, v.data, v.logLevel); err != nil {
		return nil, e.usageMistake(cmd, err.Error())
	}
	return o, nil
}

// usageMistake prints a usage mistake of cmd as one line and returns exit
// status 2.
func (e *env) usageMistake(cmd, msg string) error {
	name := strings.Replace(cmd, "-", " ", 1) // chaos-plan is "chaos plan"
	fmt.Fprintf(e.stderr, "tooldispatch %s: %s (\"tooldispatch %s --help\" lists its flags)\n", name, msg, name)
	return &exitError{code: exitUsage}
}

// flagMistake words an error of the flag package: flags with two dashes,
// an unknown flag with the closest flag of cmd, or the commands that take
// it.
func flagMistake(fs *flag.FlagSet, cmd string, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		name = strings.TrimLeft(name, "-")
		var owners []string
		for _, other := range flagCommands {
			ofs := flag.NewFlagSet(other, flag.ContinueOnError)
			defineFlags(ofs, other, &options{}, &flagVars{})
			if ofs.Lookup(name) != nil {
				owners = append(owners, strings.Replace(other, "-", " ", 1))
			}
		}
		if len(owners) > 0 {
			return fmt.Sprintf("--%s is a flag of %s, not of %s", name, strings.Join(owners, ", "), strings.Replace(cmd, "-", " ", 1))
		}
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if near := toolkit.Closest(name, names, 1); len(near) > 0 {
			return fmt.Sprintf("unknown flag --%s; did you mean --%s?", name, near[0])
		}
		return fmt.Sprintf("unknown flag --%s", name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("--%s needs a value", strings.TrimLeft(name, "-"))
	}
	// invalid value "x" for flag -name: reason
	return strings.Replace(msg, " for flag -", " for --", 1)
}

// finish checks the flag values and fills in the defaults that depend on
// others.
func (o *options) finish(e *env, workspace, data, logLevel string) error {
	maxArgs := 0
	if o.cmd == "run" || o.cmd == "chaos-plan" {
		maxArgs = 1
	}
	if len(o.args) > maxArgs {
		return fmt.Errorf("unexpected argument %q", o.args[maxArgs])
	}
	switch o.approve {
	case "", actors.ApproveAsk, actors.ApproveAll, actors.ApproveNone:
	default:
		return fmt.Errorf("--approve must be ask, all or none, got %q", o.approve)
	}
	if o.cmd == "serve" && o.approve == "" {
		// Answered over the API or on the page; run's default depends on
		// the terminal and is settled when it runs (runner.setApproval).
		o.approve = actors.ApproveAsk
	}
	if o.maxConcurrency < 0 {
		return fmt.Errorf("--max-concurrency must not be negative, got %d", o.maxConcurrency)
	}
	if o.confirmTimeout < 0 {
		return fmt.Errorf("--confirm-timeout must not be negative, got %s", o.confirmTimeout)
	}
	if strings.TrimSpace(o.provider) == "" {
		return errors.New("--provider must not be empty")
	}
	if o.cmd == "tools" {
		f, err := toolkit.ParseToolsFormat(o.toolsFormatFlag)
		if err != nil {
			return fmt.Errorf("--format: %v", err)
		}
		o.toolsFormat = f
	}
	if o.session == "" || len(o.session) > maxIDLen {
		return fmt.Errorf("--session must have 1 to %d bytes", maxIDLen)
	}
	if len(o.run) > maxIDLen {
		return fmt.Errorf("--run must have at most %d bytes", maxIDLen)
	}
	lvl, err := zerolog.ParseLevel(strings.ToLower(logLevel))
	if err != nil || logLevel == "" {
		return fmt.Errorf("--log-level must be trace, debug, info, warn, error or disabled, got %q", logLevel)
	}
	o.logLevel = lvl

	if workspace == "" {
		if workspace, err = e.getwd(); err != nil {
			return fmt.Errorf("finding the current directory for --workspace: %w", err)
		}
	}
	if o.workspace, err = filepath.Abs(workspace); err != nil {
		return fmt.Errorf("--workspace %s: %w", workspace, err)
	}
	if data == "" {
		if data, err = defaultDataDir(o.workspace); err != nil {
			return err
		}
	}
	if o.data, err = filepath.Abs(data); err != nil {
		return fmt.Errorf("--data %s: %w", data, err)
	}
	if o.run == "" {
		o.run = newRunID(time.Now())
	}
	if o.cmd == "serve" {
		if o.token, err = secretValue("--token", o.token, "--token-file", o.tokenFile, tokenEnv); err != nil {
			return err
		}
		if o.postgres, err = secretValue("--postgres", o.postgres, "--postgres-file", o.postgresFile, postgresEnv); err != nil {
			return err
		}
	}
	return nil
}

// parseInterspersed parses flags that may come before or after the
// positional arguments ("run FILE --approve none"); everything after "--"
// is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// newRunID returns a run id unique to this invocation: the time in base 36
// and 32 random bits.
func newRunID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "run-" + strconv.FormatInt(now.UnixNano(), 36) + "-" + hex.EncodeToString(b[:])
}

// printFlags prints the flags of fs the way the usage writes them, with two
// dashes.
func printFlags(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		_, isBool := f.Value.(interface{ IsBoolFlag() bool })
		line := "  --" + f.Name
		if !isBool {
			line += " " + name
		}
		switch {
		case isBool && f.DefValue == "true":
			usage += " (default true)"
		case !isBool && f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s":
			usage += fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintf(fs.Output(), "%s\n    \t%s\n", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
	})
}
