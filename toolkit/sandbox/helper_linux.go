//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// probeTimeout bounds the start-up probe of the helper.
const probeTimeout = 30 * time.Second

// init turns the process into the helper when it was started as one: it
// plays its stage (stages_linux.go) and never returns. Any other start goes
// on as usual.
func init() {
	if len(os.Args) == 0 || os.Args[0] != helperName {
		return
	}
	data, ok := os.LookupEnv(policyEnv)
	if !ok {
		return
	}
	os.Unsetenv(policyEnv)
	// syscall.Exit, not os.Exit: a helper has nothing to flush, and a
	// race-enabled binary (a test's) would wait a second in os.Exit.
	syscall.Exit(runHelper(data, os.Args[1:]))
}

// runHelper plays the stage of the policy in data for argv. It returns
// only on failure, after a probe, or with the command's exit status.
func runHelper(data string, argv []string) int {
	// What a stage sets on its thread (no_new_privs, capabilities,
	// Landlock) is what the program it starts inherits: the goroutine
	// stays on this thread.
	runtime.LockOSThread()
	var p policy
	if err := json.Unmarshal([]byte(data), &p); err != nil {
		return fail(exitSetup, "bad policy: %v", err)
	}
	if !p.Probe && (p.Path == "" || len(argv) == 0) {
		return fail(exitSetup, "no command to run")
	}
	if err := CloseOnExec(); err != nil {
		return fail(exitSetup, "%v", err)
	}
	switch p.Stage {
	case stageOuter:
		return runOuter(p, argv)
	case stageInit:
		return runInit(p, argv)
	case stageExec:
		return runExec(p, argv)
	}
	return fail(exitSetup, "bad policy: unknown stage %q", p.Stage)
}

// fail writes the helper's message to stderr and returns code.
func fail(code int, format string, args ...any) int {
	fmt.Fprintf(os.Stderr, messagePrefix+format+"\n", args...)
	return code
}

// runExec confines the process by p and execs argv: the program keeps
// this process and its place (process group, namespaces, parent).
func runExec(p policy, argv []string) int {
	abi, err := confine(p)
	if err != nil {
		return fail(exitSetup, "%v", err)
	}
	if p.Probe {
		if err := probeChecks(false); err != nil {
			return fail(exitSetup, "%v", err)
		}
		fmt.Printf("abi=%d\n", abi)
		return 0
	}
	return execFailed(p.Path, syscall.Exec(p.Path, argv, os.Environ()))
}

// execFailed reports why the program could not be started, with a
// shell's exit status for it.
func execFailed(path string, err error) int {
	switch {
	case errors.Is(err, syscall.ENOENT):
		return fail(exitNotFound, "%s: %v", path, err)
	case errors.Is(err, syscall.EACCES):
		return fail(exitSetup, "%s: %v (sandboxed commands may run programs from the system directories, the workspace "+
			"and the [sandbox] read paths only)", path, err)
	}
	return fail(exitSetup, "%s: %v", path, err)
}

// probeChecks verifies, after confine, what a command will get: the root
// directory (never allowed) cannot be listed, and in a PID namespace the
// process is its init and /proc is that namespace's.
func probeChecks(pidNamespace bool) error {
	if _, err := os.ReadDir("/"); !errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("the ruleset is not enforced (listing / gave %v)", err)
	}
	if !pidNamespace {
		return nil
	}
	if self, err := os.Readlink("/proc/self"); os.Getpid() != 1 || err != nil || self != "1" {
		return fmt.Errorf("not the init of a PID namespace with its own /proc (pid %d, /proc/self %q, %v)", os.Getpid(), self, err)
	}
	return nil
}

// landlockABI is the kernel's Landlock ABI version, 0 without Landlock.
func landlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// ruleset is what the helper restricts: every file system right, the
// IPC scopes (signals and abstract Unix sockets outside the sandbox) and,
// without network, TCP (and, where the kernel has it, UDP). BestEffort
// drops what the kernel lacks; the caller has checked abi and logs it.
func ruleset(p policy, abi int) landlock.Config {
	cfg := landlock.V11.BestEffort()
	if p.Network {
		cfg.HandledAccessNet = 0
	}
	return cfg
}

// rules grants the policy's trees. A path that does not exist is skipped.
func rules(p policy, abi int) []landlock.Rule {
	var out []landlock.Rule
	for _, path := range p.Read {
		switch kind(path) {
		case 'd':
			out = append(out, landlock.RODirs(path))
		case 'f':
			out = append(out, landlock.ROFiles(path))
		}
	}
	for _, path := range p.Write {
		switch kind(path) {
		case 'd':
			r := landlock.RWDirs(path)
			if abi >= 2 {
				// Moving files between directories of the tree (mv,
				// git, build caches).
				r = r.WithRefer()
			}
			out = append(out, r)
		case 'f':
			out = append(out, landlock.RWFiles(path))
		}
	}
	for _, dev := range []string{"/dev/null", "/dev/zero", "/dev/full"} {
		if kind(dev) != 0 {
			out = append(out, landlock.RWFiles(dev))
		}
	}
	for _, dev := range []string{"/dev/random", "/dev/urandom"} {
		if kind(dev) != 0 {
			out = append(out, landlock.ROFiles(dev))
		}
	}
	return out
}

// kind is 'd' for a directory, 'f' for anything else that exists, 0 for
// nothing.
func kind(path string) byte {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return 0
	case fi.IsDir():
		return 'd'
	}
	return 'f'
}

// probe starts the helper once for each way of confining commands, best
// first, and reports the first that works: a PID namespace (with a
// network namespace when commands get no network), then a network
// namespace alone, then Landlock alone.
func (s *Sandbox) probe() Status {
	abi := landlockABI()
	if abi < 1 {
		return Status{Reason: "Landlock is not available on this kernel (needs Linux 5.13 or later with the landlock LSM enabled)"}
	}
	netns := !s.cfg.Network
	got, err := s.runProbe(policy{Stage: stageOuter, PIDNamespace: true, NetNamespace: netns})
	if err == nil {
		return Status{ABI: got, PIDNamespace: true, NetNamespace: netns, Confined: true}
	}
	noPID := err.Error()
	errs := []string{"with a PID namespace: " + noPID}
	if netns {
		got, err := s.runProbe(policy{Stage: stageOuter, NetNamespace: true})
		if err == nil {
			return Status{ABI: got, NetNamespace: true, Confined: true, NoPIDNamespace: noPID}
		}
		errs = append(errs, "with a network namespace: "+err.Error())
	}
	got, err = s.runProbe(policy{Stage: stageExec})
	if err == nil {
		return Status{ABI: got, Confined: true, NoPIDNamespace: noPID}
	}
	errs = append(errs, err.Error())
	return Status{ABI: abi, Reason: "the sandbox helper failed: " + strings.Join(errs, "; ")}
}

// runProbe starts the helper in probe mode with the stage and namespaces
// of p and returns the ABI it applied.
func (s *Sandbox) runProbe(p policy) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	p.Read, p.Write, p.Network, p.Probe = systemRead(s.cfg.Network), []string{s.workspace}, s.cfg.Network, true
	data, err := json.Marshal(p)
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, s.exe)
	cmd.Args = []string{helperName}
	cmd.Env = []string{policyEnv + "=" + string(data)}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = "no message (does " + s.exe + " link the toolkit/sandbox package?)"
		}
		return 0, fmt.Errorf("%v: %s", err, msg)
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(stdout.String()), "abi=")
	n, err := strconv.Atoi(v)
	if !ok || err != nil {
		return 0, fmt.Errorf("unexpected answer %q (does %s link the toolkit/sandbox package?)", stdout.String(), s.exe)
	}
	return n, nil
}
