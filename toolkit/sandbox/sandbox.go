package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/rs/zerolog"
)

// Sentinel errors of the package; match them with errors.Is.
var (
	// ErrUnavailable: commands are refused because the operator requires a
	// sandbox and none can be set up (no Landlock, or tooldispatch's own
	// files lie inside a tree that commands may read).
	ErrUnavailable = errors.New("sandbox: required but not available")
	// ErrClosed: Wrap was called after Close.
	ErrClosed = errors.New("sandbox: closed")
)

const (
	// helperName is argv[0] of the helper: the executable started with it
	// (and the policy in policyEnv) confines itself and runs the command.
	helperName = "__tooldispatch-sandbox"
	// policyEnv carries the helper's policy as JSON.
	policyEnv = "TOOLDISPATCH_SANDBOX_POLICY"
	// tempDirMode is the mode of the private temp directory.
	tempDirMode fs.FileMode = 0o700
	// exitSetup is the helper's exit status when it cannot confine itself
	// or cannot start the program (as a shell's "cannot execute").
	exitSetup = 126
	// exitNotFound is the helper's exit status for a missing program.
	exitNotFound = 127
	// messagePrefix starts every message the helper writes to stderr.
	messagePrefix = "tooldispatch sandbox: "
)

// The helper's stages (policy.Stage; stages_linux.go): the exec stage
// confines itself and execs the command; the outer stage starts the next
// one in new namespaces and ends as the command ended; the init stage is
// PID 1 of the sandbox's PID namespace.
const (
	stageExec  = ""
	stageOuter = "outer"
	stageInit  = "init"
)

// Config is the operator's [sandbox] table.
//
//	[sandbox]
//	network  = false                  # allow TCP connect and bind (and UDP)
//	read     = ["/srv/reference"]     # more read-only paths
//	write    = ["/var/cache/ci"]      # more writable paths
//	required = true                   # refuse commands when no sandbox can be had
type Config struct {
	// Network lets commands open connections and listen. Off by default.
	Network bool `toml:"network"`
	// Read lists more absolute paths (directories or files) that commands
	// may read and execute.
	Read []string `toml:"read"`
	// Write lists more absolute paths that commands may read and write.
	Write []string `toml:"write"`
	// Required refuses every command when no sandbox can be set up,
	// instead of running it unconfined with a warning at start-up.
	Required bool `toml:"required"`
}

// Validate reports the first bad field.
func (c Config) Validate() error {
	for field, paths := range map[string][]string{"read": c.Read, "write": c.Write} {
		for i, p := range paths {
			switch {
			case p == "" || strings.IndexByte(p, 0) >= 0:
				return fmt.Errorf("sandbox.%s[%d]: empty or invalid path", field, i)
			case !filepath.IsAbs(p):
				return fmt.Errorf("sandbox.%s[%d]: %q is not an absolute path", field, i, p)
			}
		}
	}
	return nil
}

// Options is what the embedding program tells New.
type Options struct {
	// Workspace is the directory commands work in; they may read and write
	// it. Required.
	Workspace string
	// Protected are tooldispatch's own files and directories (the data
	// directory, the secret key, the configuration file). New warns when
	// one lies inside a tree commands may read; with Config.Required such a
	// sandbox refuses commands.
	Protected []string
	// Executable is the helper binary: an executable that links this
	// package. Empty means the running executable.
	Executable string
	// TempBase is where the private temp directory is made (default
	// os.TempDir()).
	TempBase string
	// Logger receives the start-up report. The zero value logs nothing.
	Logger zerolog.Logger
}

// Status is what New found out.
type Status struct {
	// ABI is the Landlock ABI version in force (0: none).
	ABI int
	// PIDNamespace: commands run in a PID namespace of their own, with a
	// /proc of that namespace: no process outside the sandbox (tooldispatch
	// included) exists for them. When false, NoPIDNamespace says why.
	PIDNamespace   bool
	NoPIDNamespace string
	// NetNamespace: commands without network get a network namespace of
	// their own.
	NetNamespace bool
	// Confined: commands run confined. When false, Reason says why.
	Confined bool
	Reason   string
	// Exposed lists protected paths that lie inside a tree commands may
	// read.
	Exposed []string
}

// Sandbox confines the commands it wraps. It is safe for concurrent use.
type Sandbox struct {
	// immutable after New
	cfg       Config
	exe       string
	workspace string
	tempBase  string
	status    Status
	log       zerolog.Logger

	// guarded by mu
	mu     sync.Mutex
	tmp    string // the private temp directory, made on first use
	closed bool
}

// New checks what the kernel offers by starting the helper once, logs what
// commands will get (a loud warning when they run unconfined), and returns
// the sandbox. It fails only on a bad configuration; a missing Landlock is
// reported through Status and the log. Close the sandbox when done: it
// removes the private temp directory.
func New(cfg Config, o Options) (*Sandbox, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.Workspace == "" {
		return nil, errors.New("sandbox: Options.Workspace is required")
	}
	ws, err := realPath(o.Workspace)
	if err != nil {
		return nil, fmt.Errorf("sandbox: workspace: %w", err)
	}
	for field, paths := range map[string][]string{"read": cfg.Read, "write": cfg.Write} {
		for i, p := range paths {
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("sandbox.%s[%d]: %w", field, i, err)
			}
		}
	}
	exe := o.Executable
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("sandbox: finding the helper executable: %w", err)
		}
	}
	tempBase := o.TempBase
	if tempBase == "" {
		tempBase = os.TempDir()
	}
	s := &Sandbox{cfg: cfg, exe: exe, workspace: ws, tempBase: tempBase,
		log: o.Logger.With().Str("component", "sandbox").Logger()}
	s.status = s.probe()
	s.status.Exposed = s.exposed(o.Protected)
	s.report()
	return s, nil
}

// Status reports what commands get.
func (s *Sandbox) Status() Status { return s.status }

// Describe tells a model, in one sentence, what a confined command may
// do; "" when commands are not confined.
func (s *Sandbox) Describe() string {
	if s == nil || !s.status.Confined {
		return ""
	}
	net := "no network"
	if s.cfg.Network {
		net = "network access"
	}
	return "It runs sandboxed: it may read system directories and the workspace, write only in the workspace " +
		"and $TMPDIR (a private directory, also $HOME; /tmp is not writable), and has " + net + "."
}

// report logs, once, what commands get.
func (s *Sandbox) report() {
	st := s.status
	for _, p := range st.Exposed {
		s.log.Warn().Str("path", p).Bool("required", s.cfg.Required).
			Msg("SANDBOX CANNOT PROTECT: this file of tooldispatch lies inside a directory sandboxed commands may read " +
				"(Landlock cannot deny a path inside an allowed tree); move it out of the workspace and the [sandbox] paths")
	}
	if !st.Confined {
		if s.cfg.Required {
			s.log.Error().Str("reason", st.Reason).
				Msg("SANDBOX UNAVAILABLE and [sandbox] required = true: run_command and script tools will refuse every call")
		} else {
			s.log.Warn().Str("reason", st.Reason).
				Msg("SANDBOX UNAVAILABLE: run_command and script tools run UNCONFINED, with every right of this process " +
					"(set [sandbox] required = true to refuse them instead)")
		}
		return
	}
	ev := s.log.Info().Int("landlock_abi", st.ABI).Bool("network", s.cfg.Network).Bool("pid_namespace", st.PIDNamespace).
		Bool("net_namespace", st.NetNamespace).Strs("read", s.cfg.Read).Strs("write", s.cfg.Write)
	ev.Msg("commands run sandboxed (Landlock, no capability)")
	if !st.PIDNamespace {
		s.log.Warn().Str("reason", st.NoPIDNamespace).
			Msg("SANDBOX: no PID namespace for commands: they see the other processes, tooldispatch's command line among them " +
				"(give secrets by file or environment, never on the command line)")
	}
	if !s.cfg.Network && st.ABI < 4 && !st.NetNamespace {
		s.log.Warn().Int("landlock_abi", st.ABI).
			Msg("SANDBOX: this kernel's Landlock cannot restrict TCP (ABI 4 and later) and no network namespace is available: commands can use the network")
	}
}

// Wrap rewrites cmd, built by exec.Command with its Dir, Env and
// SysProcAttr set, so that it runs confined: it starts the helper, which
// puts the program in namespaces of its own where it can, drops every
// capability, applies the ruleset and starts cmd's program, which gets
// stdin, stdout and stderr and no other descriptor. The caller sees the
// program's exit code or the signal that killed it. extraRead are more
// paths the command may read and execute (a script tool's own program).
// HOME and TMPDIR point into the private temp directory. On a nil Sandbox,
// or where no sandbox is available and none is required, cmd is left
// alone.
func (s *Sandbox) Wrap(cmd *exec.Cmd, extraRead ...string) error {
	if s == nil {
		return nil
	}
	if !s.status.Confined || (s.cfg.Required && len(s.status.Exposed) > 0) {
		if !s.cfg.Required {
			return nil
		}
		reason := s.status.Reason
		if reason == "" {
			reason = "tooldispatch's own files lie inside directories commands may read: " + strings.Join(s.status.Exposed, ", ")
		}
		return fmt.Errorf("%w: the operator requires a sandbox for commands ([sandbox] required = true) and none can be had: %s",
			ErrUnavailable, reason)
	}
	if cmd.Err != nil {
		return nil // Start reports it, as without a sandbox
	}
	if len(cmd.ExtraFiles) > 0 {
		return errors.New("sandbox: a sandboxed command gets no descriptor but stdin, stdout and stderr (ExtraFiles)")
	}
	tmp, err := s.tempDir()
	if err != nil {
		return err
	}
	p := s.policy(tmp, cmd.Path, extraRead)
	if s.status.PIDNamespace || (s.status.NetNamespace && !s.cfg.Network) {
		p.Stage = stageOuter
		p.PIDNamespace = s.status.PIDNamespace
		p.NetNamespace = s.status.NetNamespace && !s.cfg.Network
	}
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("sandbox: encoding the policy: %w", err)
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	env = setEnv(env, "HOME", tmp)
	env = setEnv(env, "TMPDIR", tmp)
	env = setEnv(env, policyEnv, string(data))
	cmd.Env = env
	cmd.Args = append([]string{helperName}, cmd.Args...)
	cmd.Path = s.exe
	return nil
}

// Close removes the private temp directory. Wrap refuses after Close.
func (s *Sandbox) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.tmp == "" {
		return nil
	}
	err := removeAll(s.tmp)
	s.tmp = ""
	return err
}

// tempDir makes the private temp directory on first use.
func (s *Sandbox) tempDir() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", ErrClosed
	}
	if s.tmp != "" {
		if _, err := os.Stat(s.tmp); err == nil {
			return s.tmp, nil
		}
	}
	sweep(s.tempBase)
	dir, err := os.MkdirTemp(s.tempBase, tempPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", fmt.Errorf("sandbox: making the private temp directory: %w", err)
	}
	if err := os.Chmod(dir, tempDirMode); err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("sandbox: private temp directory: %w", err)
	}
	s.tmp = dir
	return dir, nil
}

// tempPrefix starts the name of a private temp directory, followed by the
// owner's process id.
const tempPrefix = "tooldispatch-sandbox-"

// sweep removes the private temp directories of processes that are gone
// (killed before Close).
func sweep(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), tempPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue
		}
		_ = removeAll(filepath.Join(base, e.Name()))
	}
}

// policy is what the helper applies.
type policy struct {
	// Path is the program to execute (absent in a probe).
	Path string `json:"path,omitempty"`
	// Read and Write are the allowed trees (or single files).
	Read  []string `json:"read"`
	Write []string `json:"write"`
	// Network: TCP (and UDP) are not restricted.
	Network bool `json:"network"`
	// Probe: confine, check, report the ABI on stdout and exit.
	Probe bool `json:"probe,omitempty"`
	// Stage is the helper's part (stages_linux.go): stageOuter starts
	// the next stage in the namespaces below.
	Stage        string `json:"stage,omitempty"`
	PIDNamespace bool   `json:"pid_namespace,omitempty"`
	NetNamespace bool   `json:"net_namespace,omitempty"`
}

// policy returns the policy of one command.
func (s *Sandbox) policy(tmp, path string, extraRead []string) policy {
	read := append(systemRead(s.cfg.Network), s.cfg.Read...)
	read = append(read, extraRead...)
	write := append([]string{s.workspace, tmp}, s.cfg.Write...)
	return policy{Path: path, Read: read, Write: write, Network: s.cfg.Network}
}

// systemRead is what every command may read: the system's programs and
// libraries, the few files of /etc that programs look up (not all of /etc:
// an operator's configuration often lives there), /proc and /sys. Device
// files are added by the helper.
func systemRead(network bool) []string {
	paths := []string{
		"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc", "/sys",
		"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
		"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/localtime", "/etc/timezone",
		"/etc/os-release", "/etc/debian_version", "/etc/lsb-release", "/etc/mime.types", "/etc/protocols",
		"/etc/services", "/etc/hosts", "/etc/host.conf", "/etc/gai.conf", "/etc/resolv.conf",
		"/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/gitconfig", "/etc/inputrc",
		"/etc/locale.alias", "/etc/magic", "/etc/terminfo", "/etc/bash.bashrc", "/etc/profile",
	}
	if network {
		// /etc/resolv.conf often links here.
		paths = append(paths, "/run/systemd/resolve")
	}
	return paths
}

// exposed returns the protected paths that lie inside a tree commands may
// read or write.
func (s *Sandbox) exposed(protected []string) []string {
	trees := append(systemRead(s.cfg.Network), s.cfg.Read...)
	trees = append(trees, s.workspace)
	trees = append(trees, s.cfg.Write...)
	var out []string
	for _, p := range protected {
		if p == "" {
			continue
		}
		rp, err := realPath(p)
		if err != nil {
			rp = filepath.Clean(p)
		}
		for _, t := range trees {
			rt, err := realPath(t)
			if err != nil {
				continue
			}
			if within(rt, rp) {
				out = append(out, p)
				break
			}
		}
	}
	return slices.Compact(out)
}

// realPath is p absolute with symlinks resolved (as far as it exists).
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r, nil
	}
	// Resolve the existing parent of a path not made yet.
	dir, base := filepath.Split(abs)
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(r, base), nil
	}
	return abs, nil
}

// within reports whether p is dir or below it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// setEnv sets key in env, replacing an earlier value.
func setEnv(env []string, key, value string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// removeAll removes dir, making read-only directories writable first (a
// Go module cache marks its directories read-only).
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
