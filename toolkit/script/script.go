package script

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/internal/procgroup"
	"github.com/tooldispatch/tooldispatch/toolkit/sandbox"
)

const (
	// killGrace is how long a process group has between SIGTERM and
	// SIGKILL, and how long a finished program's output pipes may stay
	// open (held by a background descendant) before they are closed.
	killGrace = 500 * time.Millisecond
	// stderrTail is how much of stderr a failure reports.
	stderrTail = 4 << 10
	// stdoutInError is how much of stdout a failure with empty stderr
	// reports.
	stdoutInError = 2 << 10
	// defaultPath is PATH when we have none.
	defaultPath = "/usr/local/bin:/usr/bin:/bin"
)

// Origin tells where a tool was declared.
type Origin struct {
	// Path is the manifest file; "" for a tool declared in the operator's
	// configuration.
	Path string
	// Trusted: the tool's read_only flag is honoured.
	Trusted bool
	// InWorkspace: the manifest lies in the workspace (a repository's
	// own manifest); such a manifest is never trusted.
	InWorkspace bool
}

// String describes the origin for logs and messages.
func (o Origin) String() string {
	switch {
	case o.Path == "":
		return "the configuration"
	case o.InWorkspace:
		return "workspace manifest " + o.Path
	}
	return "manifest " + o.Path
}

// NewScriptTool builds the script tool spec declares, named script_<name>.
// The program runs in its own process group with a minimal environment
// (PATH, HOME, LANG, spec.Env, and TOOLDISPATCH_TOOL, TOOLDISPATCH_CALL_ID
// and TOOLDISPATCH_WORKSPACE), in spec.Dir or else workspaceDir (else the
// manifest's directory). It reads the canonical arguments on stdin; its
// stdout is the result. A non-zero exit is an error carrying the tail of
// stderr; on timeout or cancellation the whole group is killed (SIGTERM,
// then SIGKILL). ReadOnly is spec.ReadOnly only when origin is trusted.
// When sb is not nil the program runs confined by it; a program declared
// outside the workspace may read and execute its own file (only that
// file: not its directory, which may hold the configuration).
func NewScriptTool(spec ToolSpec, origin Origin, workspaceDir string, sb *sandbox.Sandbox, logger zerolog.Logger) (toolkit.Tool, error) {
	if err := spec.Validate(); err != nil {
		if ce, ok := err.(*ConfigError); ok && origin.Path != "" {
			ce.File = origin.Path
		}
		return toolkit.Tool{}, err
	}
	schema, _ := schemaJSON(spec.Schema)
	base := workspaceDir
	if origin.Path != "" {
		// Scripts sit next to the manifest file itself, also when it is
		// reached through a link.
		real, err := filepath.EvalSymlinks(origin.Path)
		if err != nil {
			real = origin.Path
		}
		base = filepath.Dir(real)
	}
	argv := append([]string(nil), spec.Command...)
	if !filepath.IsAbs(argv[0]) && strings.ContainsRune(argv[0], filepath.Separator) && base != "" {
		argv[0] = filepath.Join(base, argv[0])
	}
	dir := workspaceDir
	if dir == "" {
		dir = base
	}
	if spec.Dir != "" {
		dir = spec.Dir
		if !filepath.IsAbs(dir) && base != "" {
			dir = filepath.Join(base, dir)
		}
	}
	r := &runner{
		name:      ScriptPrefix + spec.Name,
		argv:      argv,
		dir:       dir,
		workspace: workspaceDir,
		env:       spec.Env,
		timeout:   effectiveTimeout(spec.Timeout),
		maxOut:    orDefault(spec.MaxOutput, DefaultMaxOutput),
		sandbox:   sb,
		ownFile:   !origin.InWorkspace,
		log:       logger,
	}
	desc := spec.Description
	if desc == "" {
		desc = fmt.Sprintf("Runs %s (a script tool declared in %s).", filepath.Base(argv[0]), origin)
	}
	return toolkit.Tool{
		Name:        r.name,
		Description: desc,
		Schema:      schema,
		Concurrent:  spec.Concurrent,
		ReadOnly:    spec.ReadOnly && origin.Trusted,
		Timeout:     spec.Timeout,
		Handler:     r.run,
		Source:      toolkit.SourceScript,
	}, nil
}

// effectiveTimeout fills in the default call timeout.
func effectiveTimeout(d time.Duration) time.Duration {
	t := toolkit.Tool{Timeout: d}
	return t.EffectiveTimeout()
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// runner runs the calls of one script tool; safe for concurrent use.
type runner struct {
	// immutable after NewScriptTool
	name      string
	argv      []string
	dir       string
	workspace string
	env       map[string]string
	timeout   time.Duration
	maxOut    int
	sandbox   *sandbox.Sandbox
	ownFile   bool // the sandbox lets the program read its own file
	log       zerolog.Logger
}

func (r *runner) run(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return toolkit.Result{}, err
	}
	stdin := c.Args.Canonical
	if len(stdin) == 0 {
		stdin = []byte("{}")
	}
	cmd := exec.Command(r.argv[0], r.argv[1:]...)
	cmd.Dir = r.dir
	cmd.Env = r.environ(c.ID)
	cmd.Stdin = bytes.NewReader(stdin)
	stdout := &headBuffer{limit: r.maxOut}
	stderr := &tailBuffer{limit: stderrTail}
	// Redacted as they arrive, before the buffers cut them.
	outW, errW := redactingTo(c, stdout), redactingTo(c, stderr)
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = killGrace
	var own []string
	if r.ownFile && cmd.Err == nil {
		own = append(own, cmd.Path)
	}
	if err := r.sandbox.Wrap(cmd, own...); err != nil {
		return toolkit.Result{}, fmt.Errorf("%s: %w", r.name, err)
	}

	began := time.Now()
	if err := cmd.Start(); err != nil {
		return toolkit.Result{}, fmt.Errorf("%s: starting %s: %w", r.name, r.argv[0], err)
	}
	pgid := cmd.Process.Pid
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	var err error
	stopped := false
	select {
	case err = <-waited:
	case <-ctx.Done():
		stopped = true
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		grace := time.NewTimer(killGrace)
		select {
		case err = <-waited:
			grace.Stop()
		case <-grace.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			err = <-waited
		}
	}
	// Nothing the program started may outlive the call.
	procgroup.Stop(pgid, killGrace, syscall.SIGKILL)
	outW.flush()
	errW.flush()
	elapsed := time.Since(began).Round(time.Millisecond)
	r.log.Debug().Str("tool", r.name).Dur("elapsed", elapsed).Int("exit", cmd.ProcessState.ExitCode()).
		Int64("stdout_bytes", stdout.total).Int64("stderr_bytes", stderr.total).Msg("script tool ended")

	if stopped {
		return toolkit.Result{}, fmt.Errorf("%s stopped after %s and its process group was killed: %w%s",
			r.name, elapsed, ctx.Err(), stderr.section())
	}
	var exitErr *exec.ExitError
	if cmd.ProcessState == nil || (err != nil && !errors.As(err, &exitErr) && !errors.Is(err, exec.ErrWaitDelay)) {
		return toolkit.Result{}, fmt.Errorf("%s: %w", r.name, err)
	}
	if !cmd.ProcessState.Success() {
		detail := stderr.section()
		if detail == "" {
			detail = stdout.section(stdoutInError)
		}
		return toolkit.Result{}, fmt.Errorf("%s failed with %s after %s%s", r.name, exitStatus(cmd.ProcessState), elapsed, detail)
	}
	out := stdout.String()
	if out == "" {
		out = "(no output)"
	}
	return toolkit.Result{Content: out}, nil
}

// environ is the program's environment.
func (r *runner) environ(callID string) []string {
	vars := map[string]string{"PATH": defaultPath, "HOME": "/", "LANG": "C.UTF-8"}
	for k := range vars {
		if v := os.Getenv(k); v != "" {
			vars[k] = v
		}
	}
	for k, v := range r.env {
		vars[k] = v
	}
	vars["TOOLDISPATCH_TOOL"] = r.name
	vars["TOOLDISPATCH_CALL_ID"] = callID
	vars["TOOLDISPATCH_WORKSPACE"] = r.workspace
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// exitStatus describes how a process ended.
func exitStatus(state *os.ProcessState) string {
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return "exit code " + strconv.Itoa(state.ExitCode())
}

// redactingWriter redacts what is written to it, across writes, before w
// keeps it; safe for concurrent use.
type redactingWriter struct {
	mu sync.Mutex
	rs toolkit.RedactStream // guarded by mu
	w  io.Writer            // guarded by mu
}

// redactingTo returns a writer that redacts with the call's redactor
// before writing to w.
func redactingTo(c *toolkit.Call, w io.Writer) *redactingWriter {
	return &redactingWriter{rs: c.RedactStream(), w: w}
}

// Write redacts p and writes what is settled; it never fails.
func (r *redactingWriter) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = io.WriteString(r.w, r.rs.Write(string(p)))
	return len(p), nil
}

// flush writes what the redactor held back: the output has ended.
func (r *redactingWriter) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = io.WriteString(r.w, r.rs.Flush())
}

// headBuffer keeps the first limit bytes written to it (and a marker's
// length more, to cut outside redaction markers).
type headBuffer struct {
	limit int
	buf   []byte
	total int64
}

// Write keeps what fits; it never fails.
func (b *headBuffer) Write(p []byte) (int, error) {
	b.total += int64(len(p))
	if room := b.limit + toolkit.MaxMarkerLen - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// String returns the kept output, saying how much was cut.
func (b *headBuffer) String() string {
	if b.total <= int64(b.limit) {
		return validText(b.buf, true)
	}
	kept := b.buf[:toolkit.SafeCut(string(b.buf), b.limit)]
	return validText(kept, true) + fmt.Sprintf("\n[… output cut: %d of %d bytes kept …]", len(kept), b.total)
}

// section is the start of the output for an error message, or "".
func (b *headBuffer) section(limit int) string {
	if b.total == 0 {
		return ""
	}
	head := b.buf[:toolkit.SafeCut(string(b.buf), limit)]
	return "; stdout (start):\n" + validText(head, true)
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	limit int
	buf   []byte
	total int64
}

// Write keeps the tail; it never fails.
func (b *tailBuffer) Write(p []byte) (int, error) {
	b.total += int64(len(p))
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.limit {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.limit:]...)
	}
	return len(p), nil
}

// section is the tail of stderr for an error message, or "".
func (b *tailBuffer) section() string {
	tail := b.buf
	if len(tail) > b.limit {
		tail = tail[toolkit.SafeStart(string(tail), len(tail)-b.limit):]
	}
	text := strings.TrimRight(validText(tail, false), "\n")
	if strings.TrimSpace(text) == "" {
		return ""
	}
	if b.total > int64(len(tail)) {
		return fmt.Sprintf("; stderr (last %d of %d bytes):\n%s", len(tail), b.total, text)
	}
	return "; stderr:\n" + text
}

// validText returns b as valid UTF-8, dropping a character cut at the end
// (head) or the start (tail).
func validText(b []byte, head bool) string {
	if head {
		for i := 0; i < 3 && len(b) > 0 && !validEnd(b); i++ {
			b = b[:len(b)-1]
		}
	} else {
		for i := 0; i < 3 && len(b) > 0 && b[0]&0xc0 == 0x80; i++ {
			b = b[1:]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// validEnd reports whether b does not end inside a multi-byte character.
func validEnd(b []byte) bool {
	for i := len(b) - 1; i >= 0 && i >= len(b)-4; i-- {
		c := b[i]
		if c&0xc0 == 0x80 {
			continue
		}
		need := 1
		switch {
		case c >= 0xf0:
			need = 4
		case c >= 0xe0:
			need = 3
		case c >= 0xc0:
			need = 2
		}
		return len(b)-i >= need
	}
	return true
}
