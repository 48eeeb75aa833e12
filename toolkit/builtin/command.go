package builtin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/internal/procgroup"
	"github.com/tooldispatch/tooldispatch/toolkit/sandbox"
)

const (
	// commandTimeout is run_command's declared timeout (SPEC section 3).
	commandTimeout = 300 * time.Second
	// killGrace is how long a process group has between SIGTERM and SIGKILL.
	killGrace = 500 * time.Millisecond
	// emitChunk is the longest piece of a line streamed as one event.
	emitChunk = 4 << 10
	// streamFactor: streaming stops after streamFactor × OutputCap bytes.
	streamFactor = 4
	// defaultPath is PATH when the parent has none.
	defaultPath = "/usr/local/bin:/usr/bin:/bin"
)

// errCommandTimeout is the cause of a context ended by timeout_ms.
var errCommandTimeout = errors.New("timeout_ms reached")

// commandRunner runs run_command calls.
type commandRunner struct {
	// immutable after commandTool
	ws        *Workspace
	sandbox   *sandbox.Sandbox
	shell     bool
	outputCap int
	log       zerolog.Logger
}

func commandTool(d Deps) toolkit.Tool {
	r := &commandRunner{ws: d.Workspace, sandbox: d.Sandbox, shell: d.Shell, outputCap: d.OutputCap, log: d.Logger}
	shellNote := "Shell mode is disabled on this host: use argv."
	if d.Shell {
		shellNote = "Give argv, or shell for a command line that needs pipes or redirections."
	}
	if note := d.Sandbox.Describe(); note != "" {
		shellNote += " " + note
	}
	return toolkit.Tool{
		Name: RunCommandName,
		Description: "Run a program in the workspace and return its exit code and output (stdout and stderr " +
			"together, streamed while it runs; long output keeps its head and tail). It runs with a minimal " +
			"environment (PATH, HOME, LANG), stdin empty unless given, and a timeout; when it ends, times out " +
			"or is cancelled, its whole process group is stopped, background processes included. A non-zero exit " +
			"is an error. " + shellNote,
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"argv": {
					"type": "array",
					"description": "The program and its arguments, run directly without a shell, e.g. [\"go\", \"test\", \"./...\"]. Give argv or shell, not both.",
					"items": {"type": "string", "description": "One argument."},
					"minItems": 1,
					"maxItems": 1000
				},
				"shell": {
					"type": "string",
					"description": "A command line run by /bin/sh -c, for pipes, redirections and &&. Only when the host enables shell mode; give argv or shell, not both.",
					"minLength": 1
				},
				"cwd": {
					"type": "string",
					"description": "Working directory, relative to the workspace root (default: the root)."
				},
				"timeout_ms": {
					"type": "integer",
					"description": "Stop the command after this many milliseconds (default and maximum 300000).",
					"minimum": 1,
					"maximum": 300000
				},
				"stdin": {
					"type": "string",
					"description": "Text fed to the command's standard input (default: empty)."
				}
			},
			"additionalProperties": false
		}`),
		Timeout:         commandTimeout,
		Handler:         r.run,
		StaleOnMutation: true,
	}
}

func (r *commandRunner) run(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	argv, err := r.argv(c.Args)
	if err != nil {
		return toolkit.Result{}, err
	}
	dir := "."
	if cwd := c.Args.String("cwd"); cwd != "" {
		if dir, err = r.ws.Clean(cwd); err != nil {
			return toolkit.Result{}, err
		}
		fi, err := r.ws.stat(dir)
		if err != nil {
			return toolkit.Result{}, err
		}
		if !fi.IsDir() {
			return toolkit.Result{}, &fileError{path: dir, what: "is not a directory"}
		}
	}
	if !r.shell {
		if how := hiddenShell(argv, r.ws.abs(dir)); how != "" {
			return toolkit.Result{}, fmt.Errorf("shell mode is disabled on this host, and this argv runs a shell reading a command line "+
				"(%s): pass the program and its arguments as argv, without a shell, e.g. {\"argv\": [\"ls\", \"-la\"]}; "+
				"pipes and redirections are not available", how)
		}
	}
	if ms := c.Args.Int("timeout_ms", 0); ms > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, time.Duration(ms)*time.Millisecond, errCommandTimeout)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return toolkit.Result{}, err
	}

	var stdin io.Reader
	if s, ok := c.Args.Value["stdin"].(string); ok {
		stdin = strings.NewReader(s)
	}
	start := time.Now()
	emit := c.Emit
	if emit == nil {
		emit = func(string) {}
	}
	out, state, stopped, err := r.runProcess(ctx, argv, r.ws.abs(dir), stdin, emit, c.RedactStream())
	elapsed := time.Since(start).Round(time.Millisecond)
	if err != nil {
		return toolkit.Result{}, err
	}

	program := filepath.Base(argv[0])
	r.log.Debug().Str("tool", "run_command").Str("program", program).Int("exit", state.ExitCode()).
		Dur("elapsed", elapsed).Int64("output_bytes", out.total).Msg("command ended")

	if stopped {
		if errors.Is(context.Cause(ctx), errCommandTimeout) {
			return toolkit.Result{}, fmt.Errorf("command timed out after %s (timeout_ms) and its process group was killed; output so far:\n%s",
				elapsed, out.String())
		}
		return toolkit.Result{}, fmt.Errorf("command stopped after %s, process group killed: %w; output so far:\n%s",
			elapsed, ctx.Err(), out.String())
	}
	status := exitStatus(state)
	if !state.Success() {
		return toolkit.Result{}, fmt.Errorf("command failed with %s after %s; output:\n%s", status, elapsed, out.String())
	}
	return toolkit.Result{Content: fmt.Sprintf("%s after %s; output:\n%s", status, elapsed, out.String())}, nil
}

// argv picks the command to run from the arguments.
func (r *commandRunner) argv(a toolkit.Args) ([]string, error) {
	shell, hasShell := a.Value["shell"].(string)
	_, hasArgv := a.Value["argv"]
	switch {
	case hasShell && hasArgv:
		return nil, errors.New("give argv or shell, not both")
	case hasShell && !r.shell:
		return nil, errors.New("shell mode is disabled on this host: pass the program and its arguments as argv, " +
			`e.g. {"argv": ["ls", "-la"]}; pipes and redirections are not available`)
	case hasShell:
		if strings.TrimSpace(shell) == "" {
			return nil, errors.New("shell is empty: give a command line")
		}
		return []string{"/bin/sh", "-c", shell}, nil
	}
	argv := a.Strings("argv")
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New(`argv is empty: give the program and its arguments, e.g. {"argv": ["go", "version"]}`)
	}
	return argv, nil
}

// runProcess runs argv in dir in its own process group and waits until the
// process and every member of its group are gone. When ctx ends first, the
// group gets SIGTERM, then SIGKILL after killGrace, and stopped is true. Output (stdout and stderr on
// one pipe, in the order written) streams to emit line by line; what is
// kept of it is redacted by rs first, so that the cut between its head and
// its tail leaves no part of a secret.
func (r *commandRunner) runProcess(ctx context.Context, argv []string, dir string, stdin io.Reader, emit func(string), rs toolkit.RedactStream) (out *capture, state *os.ProcessState, stopped bool, err error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = minimalEnv()
	cmd.Stdin = stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Bounds how long Wait waits for the stdin copy when a survivor keeps
	// the pipe open.
	cmd.WaitDelay = killGrace
	if err := r.sandbox.Wrap(cmd); err != nil {
		return nil, nil, false, err
	}

	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, false, fmt.Errorf("creating the output pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, nil, false, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	pw.Close()
	pgid := cmd.Process.Pid

	out = newCapture(r.outputCap)
	pumpDone := make(chan struct{})
	go func() {
		defer close(pumpDone)
		pump(pr, out, rs, emit, int64(streamFactor*r.outputCap))
	}()
	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()

	select {
	case <-waitDone:
	case <-ctx.Done():
		stopped = true
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		grace := time.NewTimer(killGrace)
		select {
		case <-waitDone:
			grace.Stop()
		case <-grace.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-waitDone
		}
	}
	// The leader is gone; nothing it started may outlive the call.
	procgroup.Stop(pgid, killGrace, syscall.SIGTERM, syscall.SIGKILL)

	// Every writer of the pipe is dead unless one left the process group;
	// do not wait for such a runaway.
	grace := time.NewTimer(killGrace)
	select {
	case <-pumpDone:
		grace.Stop()
	case <-grace.C:
		pr.Close()
		<-pumpDone
	}
	pr.Close()
	return out, cmd.ProcessState, stopped, nil
}

// minimalEnv is the environment of a command: PATH, HOME and LANG only, so
// no secret of the parent's environment reaches it.
func minimalEnv() []string {
	env := func(key, def string) string {
		if v := os.Getenv(key); v != "" {
			return key + "=" + v
		}
		return key + "=" + def
	}
	return []string{env("PATH", defaultPath), env("HOME", "/"), env("LANG", "C.UTF-8")}
}

// exitStatus describes how a process ended.
func exitStatus(state *os.ProcessState) string {
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by signal " + ws.Signal().String()
	}
	return "exit code " + strconv.Itoa(state.ExitCode())
}

// pump reads the command's output until the pipe closes, keeps it in out
// (redacted by rs) and streams it to emit a line at a time, up to streamCap
// bytes.
func pump(r io.Reader, out *capture, rs toolkit.RedactStream, emit func(string), streamCap int64) {
	var streamed int64
	stopped := false
	send := func(p []byte) {
		if stopped || len(p) == 0 {
			return
		}
		if streamed+int64(len(p)) > streamCap {
			stopped = true
			emit(fmt.Sprintf("[streaming stopped after %s; the result keeps the head and tail of the output]\n", toolkit.HumanSize(streamed)))
			return
		}
		streamed += int64(len(p))
		emit(strings.ToValidUTF8(string(p), "\uFFFD"))
	}
	buf := make([]byte, 32<<10)
	var line []byte
	for {
		n, err := r.Read(buf)
		chunk := buf[:n]
		out.Write([]byte(rs.Write(string(chunk))))
		if err != nil {
			out.Write([]byte(rs.Flush()))
		}
		for len(chunk) > 0 {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				line = append(line, chunk...)
				break
			}
			line = append(line, chunk[:i+1]...)
			send(line)
			line = line[:0]
			chunk = chunk[i+1:]
		}
		for len(line) >= emitChunk {
			send(line[:emitChunk])
			line = append(line[:0], line[emitChunk:]...)
		}
		if err != nil {
			send(line)
			return
		}
	}
}

// capture keeps the head and the tail of a stream within a byte budget.
// The stream is redacted already; the head and the tail are cut outside
// redaction markers, for which each keeps toolkit.MaxMarkerLen bytes more
// than its share.
type capture struct {
	limit int // head and tail show limit/2 bytes each
	head  []byte
	tail  []byte // the last bytes after head filled up; trimmed lazily
	total int64
}

func newCapture(limit int) *capture { return &capture{limit: limit} }

// Write keeps p; it never fails.
func (c *capture) Write(p []byte) {
	c.total += int64(len(p))
	if room := c.limit/2 + toolkit.MaxMarkerLen - len(c.head); room > 0 {
		n := min(room, len(p))
		c.head = append(c.head, p[:n]...)
		p = p[n:]
	}
	c.tail = append(c.tail, p...)
	if keep := c.limit - c.limit/2 + toolkit.MaxMarkerLen; len(c.tail) > 2*keep {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-keep:]...)
	}
}

// String returns the kept output, saying how much was cut in the middle.
func (c *capture) String() string {
	if c.total == 0 {
		return "(no output)\n"
	}
	head, tail := string(c.head), string(c.tail)
	if keep := c.limit - c.limit/2; c.total > int64(c.limit) {
		if int64(len(head)+len(tail)) == c.total {
			// Nothing dropped yet: cut the one text.
			all := head + tail
			head, tail = all[:toolkit.SafeCut(all, c.limit/2)], all[toolkit.SafeStart(all, len(all)-keep):]
		} else {
			head = head[:toolkit.SafeCut(head, c.limit/2)]
			tail = tail[toolkit.SafeStart(tail, len(tail)-keep):]
		}
	}
	var b strings.Builder
	b.WriteString(strings.ToValidUTF8(head, "\uFFFD"))
	if cut := c.total - int64(len(head)) - int64(len(tail)); cut > 0 {
		fmt.Fprintf(&b, "\n[… %s of output cut (%s in all); head and tail kept …]\n", toolkit.HumanSize(cut), toolkit.HumanSize(c.total))
	}
	b.WriteString(strings.ToValidUTF8(tail, "\uFFFD"))
	if !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n")
	}
	return b.String()
}
