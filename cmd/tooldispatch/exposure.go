package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tooldispatch/tooldispatch/toolkit/sandbox"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

// Environment variables that carry secrets.
const (
	// tokenEnv is serve's bearer token when neither --token nor
	// --token-file is given.
	tokenEnv = "TOOLDISPATCH_TOKEN"
	// postgresEnv is the cluster's PostgreSQL URL when neither --postgres
	// nor --postgres-file is given.
	postgresEnv = "TOOLDISPATCH_PG_URL"
)

// secretEnv are the environment variables whose values tooldispatch takes
// out of its environment: the secrets' key, serve's token, the cluster's
// PostgreSQL URL and password (read by the PostgreSQL driver), and the
// OTLP exporter's headers (which often carry an API key).
var secretEnv = []string{secrets.EnvKey, tokenEnv, postgresEnv, "PGPASSWORD",
	"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"}

// maxSecretFile is the most of a --token-file or --postgres-file read.
const maxSecretFile = 64 << 10

// scrubByte replaces the bytes of a secret in the memory /proc shows.
const scrubByte = '*'

// hideProcess keeps what this process was given out of other processes'
// sight, before anything else runs, and returns what it could not do:
//   - the values of the secret flags (secretFlags) and variables
//     (secretEnv) are overwritten in the memory that /proc/PID/cmdline and
//     /proc/PID/environ show (the Go runtime keeps its own copies, os.Args
//     cloned here); they stay visible to other local users for the moment
//     between the start and this, so a file or the environment is the way
//     to give them;
//   - the process is not dumpable: no process of the same user without
//     CAP_SYS_PTRACE may read its memory, environment, memory map or
//     descriptors, or trace it (a sandboxed command among them, where no
//     PID namespace hides tooldispatch);
//   - every descriptor above stderr that its parent left open becomes
//     close-on-exec, so that no child (a command, an MCP server) inherits
//     one.
func hideProcess() []error {
	var errs []error
	args := make([]string, len(os.Args))
	for i, a := range os.Args {
		args[i] = strings.Clone(a)
	}
	os.Args = args
	if err := scrubProcMemory(); err != nil {
		errs = append(errs, fmt.Errorf("hiding the secrets of the command line and environment: %w", err))
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		errs = append(errs, fmt.Errorf("making the process not dumpable: %w", err))
	}
	if err := sandbox.CloseOnExec(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// forgetSecretEnv removes the secret variables from the environment once
// they are read, so that nothing started later inherits them.
func forgetSecretEnv() {
	for _, k := range secretEnv {
		os.Unsetenv(k)
	}
}

// scrubProcMemory overwrites the secret values in the argument and
// environment areas of this process (their bounds are in /proc/self/stat),
// through /proc/self/mem.
func scrubProcMemory() error {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return err
	}
	// Fields after "pid (comm) ": field 3, the state, is fields[0].
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return errors.New("/proc/self/stat: no command name")
	}
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 49 {
		return errors.New("/proc/self/stat: no argument and environment bounds (Linux 3.5 or later)")
	}
	var bounds [4]int64 // arg_start, arg_end, env_start, env_end: fields 48 to 51
	for i := range bounds {
		if bounds[i], err = strconv.ParseInt(fields[45+i], 10, 64); err != nil {
			return fmt.Errorf("/proc/self/stat field %d: %w", 48+i, err)
		}
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	for _, area := range []struct {
		start, end int64
		scrub      func([]byte) bool
	}{{bounds[0], bounds[1], scrubArgs}, {bounds[2], bounds[3], scrubEnv}} {
		if area.end <= area.start {
			continue
		}
		buf := make([]byte, area.end-area.start)
		if _, err := mem.ReadAt(buf, area.start); err != nil {
			return err
		}
		if area.scrub(buf) {
			if _, err := mem.WriteAt(buf, area.start); err != nil {
				return err
			}
		}
	}
	return nil
}

// scrubArgs overwrites, in the NUL-separated arguments in area, the values
// of secretFlags (--token X, --token=X, -postgres X …); it reports whether
// it changed anything.
func scrubArgs(area []byte) bool {
	changed := false
	args := bytes.Split(area, []byte{0})
	for i := 1; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' || bytes.Equal(a, []byte("--")) {
			if bytes.Equal(a, []byte("--")) {
				break // the rest is positional
			}
			continue
		}
		name, value, hasValue := bytes.Cut(bytes.TrimLeft(a, "-"), []byte("="))
		if !isSecretFlag(string(name)) {
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				break
			}
			i++
			value = args[i]
		}
		for j := range value {
			value[j] = scrubByte
		}
		changed = changed || len(value) > 0
	}
	return changed
}

// scrubEnv overwrites the values of secretEnv in the NUL-separated
// NAME=VALUE entries in area; it reports whether it changed anything.
func scrubEnv(area []byte) bool {
	changed := false
	for _, kv := range bytes.Split(area, []byte{0}) {
		name, value, ok := bytes.Cut(kv, []byte("="))
		if !ok || !isSecretEnv(string(name)) {
			continue
		}
		for j := range value {
			value[j] = scrubByte
		}
		changed = changed || len(value) > 0
	}
	return changed
}

func isSecretEnv(name string) bool {
	for _, k := range secretEnv {
		if name == k {
			return true
		}
	}
	return false
}

// secretValue is a secret given by flag, by file or by environment
// variable, in that order: both the flag and the file is a mistake; a file
// that cannot be read or holds nothing is one too. The value never appears
// in an error.
func secretValue(flagName, flagValue, fileFlag, file, env string) (string, error) {
	switch {
	case flagValue != "" && file != "":
		return "", fmt.Errorf("give %s or %s, not both", flagName, fileFlag)
	case flagValue != "":
		return flagValue, nil
	case file != "":
		f, err := os.Open(file)
		if err != nil {
			return "", fmt.Errorf("%s: %w", fileFlag, err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxSecretFile))
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", fileFlag, file, err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("%s %s is empty", fileFlag, file)
		}
		return v, nil
	}
	return os.Getenv(env), nil
}
