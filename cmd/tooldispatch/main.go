// Command tooldispatch runs the tool calls of assistant turns from the
// command line: it reads turns, dispatches them through the actors package
// with the built-in tools, and prints events and results as JSON Lines.
//
// Usage:
//
//	tooldispatch run     [flags] [FILE|-]   dispatch turns read from a file or stdin, print JSON Lines
//	tooldispatch tools   [flags]            print the tools array and the turn-context text a provider gets
//	tooldispatch session [flags]            print a persisted session: {"tools":[…],"tool_histories":[…]}
//	tooldispatch serve   [flags]            HTTP service, default address 127.0.0.1:8723
//	tooldispatch chaos   plan|report        chaos mode: print a policy's faults before a run, or report them after
//	tooldispatch bench   [flags]            the dispatch benchmark
//	tooldispatch version                    print the version, the commit and the Go version
//
// Exit status: 0 when every turn was dispatched, whatever the tools'
// statuses; 1 for unreadable input; 2 for a usage error; 3 when the
// dispatcher or its store failed, or the output could not be written; 130
// and 143 after SIGINT and SIGTERM (the running turn is canceled, and its
// results are committed and printed).
//
// The command parses flags, wires the packages together and prints; it
// must hold no rule of the dispatcher (how a call is read, validated, run,
// de-duplicated or reported): those live in actors and toolkit.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tooldispatch/tooldispatch/cachestore"
)

// Exit statuses.
const (
	exitOK      = 0
	exitInput   = 1   // unreadable run input
	exitUsage   = 2   // bad command, flag or flag value
	exitFailure = 3   // the dispatcher, its store or the output failed
	exitNoSpace = 4   // the data folder is below its free-space reserve
	exitSIGINT  = 130 // 128 + SIGINT
	exitSIGTERM = 143 // 128 + SIGTERM
)

const usageText = `Usage:
  tooldispatch run     [flags] [FILE|-]   dispatch turns read from FILE or stdin, print JSON Lines
  tooldispatch tools   [flags]            print the tools array and the turn-context text a provider gets
  tooldispatch session [flags]            print a persisted session: {"tools":[…],"tool_histories":[…]}
  tooldispatch serve   [flags]            HTTP service, default address 127.0.0.1:8723
  tooldispatch chaos   plan|report        chaos mode: print a policy's faults before a run, or report them after
  tooldispatch bench   [flags]            the dispatch benchmark: tooldispatch against a bare dispatcher and eino
  tooldispatch cluster certs [flags] NAME  make the mutual TLS certificates of a cluster member
  tooldispatch version                    print the version, the commit and the Go version

Run "tooldispatch COMMAND --help" for the flags of a command.

Exit status: 0 when every turn was dispatched, whatever the tools' statuses;
1 for unreadable input, or a session that does not exist; 2 for a usage
error; 3 when the dispatcher or its store failed, or the output could not be
written; 130 and 143 after SIGINT and SIGTERM.
`

// env is what one invocation gets from its process: the standard streams,
// the terminal and the signals. main fills it from the operating system;
// tests fill it in.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// stdinTerminal reports whether stdin is a terminal.
	stdinTerminal bool
	// stdoutTerminal reports whether stdout is a terminal: run then prints
	// for people (--pretty) unless told otherwise.
	stdoutTerminal bool
	// openTTY opens the controlling terminal for prompts; nil means there
	// is none.
	openTTY func() (io.ReadWriteCloser, error)
	// notify subscribes to SIGINT and SIGTERM and returns the channel and a
	// function that ends the subscription; nil means no signals.
	notify func() (<-chan os.Signal, func())
	// exitNow ends the process at once (a second signal); nil means ignore.
	exitNow func(code int)
	// ignoreSIGPIPE makes a write to a closed stdout fail with an error
	// instead of killing the process, so run can finish the turn it is in;
	// nil means leave SIGPIPE alone.
	ignoreSIGPIPE func()
	// getwd returns the default workspace.
	getwd func() (string, error)
	// wrapStore wraps the store the dispatcher writes through (tests
	// inject store faults with it); nil means none.
	wrapStore func(cachestore.Store) cachestore.Store
}

func main() {
	for _, err := range hideProcess() {
		fmt.Fprintf(os.Stderr, "tooldispatch: warning: %v\n", err)
	}
	e := &env{
		stdin:          os.Stdin,
		stdout:         os.Stdout,
		stderr:         os.Stderr,
		stdinTerminal:  isTerminal(os.Stdin),
		stdoutTerminal: isTerminal(os.Stdout),
		openTTY:        openTTY,
		notify: func() (<-chan os.Signal, func()) {
			c := make(chan os.Signal, 2)
			signal.Notify(c, os.Interrupt, syscall.SIGTERM)
			return c, func() { signal.Stop(c) }
		},
		exitNow:       os.Exit,
		ignoreSIGPIPE: func() { signal.Ignore(syscall.SIGPIPE) },
		getwd:         os.Getwd,
	}
	os.Exit(e.main(os.Args[1:]))
}

// main runs one command line and returns its exit status.
func (e *env) main(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usageText)
		return exitUsage
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "run":
		err = e.cmdRun(rest)
	case "tools":
		err = e.cmdTools(rest)
	case "session":
		err = e.cmdSession(rest)
	case "serve":
		err = e.cmdServe(rest)
	case "chaos":
		err = e.cmdChaos(rest)
	case "bench":
		err = e.cmdBench(rest)
	case "version":
		err = e.cmdVersion(rest)
	case "cluster":
		err = e.cmdCluster(rest)
	case "help", "-h", "-help", "--help":
		if cmd == "help" && len(rest) > 0 && rest[0] != "help" {
			// "help COMMAND" is "COMMAND --help".
			return e.main([]string{rest[0], "--help"})
		}
		fmt.Fprint(e.stdout, usageText)
		return exitOK
	default:
		fmt.Fprintf(e.stderr, "tooldispatch: unknown command %q\n\n%s", cmd, usageText)
		return exitUsage
	}
	return e.exitCode(err)
}

// exitError is a command's failure with the exit status it calls for. A nil
// err means the message was already printed (the flag package does so).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// signalExit is the exit status after signal s: 143 for SIGTERM, 130
// otherwise.
func signalExit(s os.Signal) int {
	if s == syscall.SIGTERM {
		return exitSIGTERM
	}
	return exitSIGINT
}

// failf returns an exitError with code and a formatted message.
func failf(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

// exitCode prints err, if it has a message, and returns its exit status.
func (e *env) exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var xe *exitError
	if !errors.As(err, &xe) {
		fmt.Fprintf(e.stderr, "tooldispatch: %v\n", err)
		return exitFailure
	}
	if xe.err != nil {
		fmt.Fprintf(e.stderr, "tooldispatch: %v\n", xe.err)
	}
	return xe.code
}
