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
	"golang.org/x/sys/unix"
)

// probeTimeout bounds the start-up probe of the helper.
const probeTimeout = 30 * time.Second

// init turns the process into the helper when it was started as one: it
// confines itself and execs the command, and never returns. Any other
// start goes on as usual.
func init() {
	if len(os.Args) == 0 || os.Args[0] != helperName {
		return
	}
	data, ok := os.LookupEnv(policyEnv)
	if !ok {
		return
	}
	os.Unsetenv(policyEnv)
	os.Exit(runHelper(data, os.Args[1:]))
}

// runHelper confines the process by the policy in data and execs argv. It
// returns only on failure (or after a probe), with the exit status.
func runHelper(data string, argv []string) int {
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(os.Stderr, messagePrefix+format+"\n", args...)
		return code
	}
	var p policy
	if err := json.Unmarshal([]byte(data), &p); err != nil {
		return fail(exitSetup, "bad policy: %v", err)
	}
	if !p.Probe && (p.Path == "" || len(argv) == 0) {
		return fail(exitSetup, "no command to run")
	}
	abi := landlockABI()
	if abi < 1 {
		return fail(exitSetup, "Landlock is not available on this kernel")
	}
	fd, flags, err := ruleset(p, abi).NewRulesetFD(rules(p, abi)...)
	if err != nil {
		return fail(exitSetup, "building the Landlock ruleset: %v", err)
	}
	if fd < 0 {
		return fail(exitSetup, "Landlock ABI %d gave no ruleset", abi)
	}
	// Only this thread is confined; execve keeps just this thread.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(exitSetup, "setting no_new_privs: %v", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fail(exitSetup, "landlock_restrict_self: %v", err)
	}
	unix.Close(fd)
	if p.Probe {
		// The root directory is never allowed: listing it must fail.
		if _, err := os.ReadDir("/"); !errors.Is(err, os.ErrPermission) {
			return fail(exitSetup, "the ruleset is not enforced (listing / gave %v)", err)
		}
		fmt.Printf("abi=%d\n", abi)
		return 0
	}
	err = syscall.Exec(p.Path, argv, os.Environ())
	switch {
	case errors.Is(err, syscall.ENOENT):
		return fail(exitNotFound, "%s: %v", p.Path, err)
	case errors.Is(err, syscall.EACCES):
		return fail(exitSetup, "%s: %v (sandboxed commands may run programs from the system directories, the workspace "+
			"and the [sandbox] read paths only)", p.Path, err)
	}
	return fail(exitSetup, "%s: %v", p.Path, err)
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

// netNamespace makes the child start in new user and network namespaces,
// with this process's user and group mapped to themselves.
func netNamespace(attr *syscall.SysProcAttr) {
	attr.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
	uid, gid := os.Getuid(), os.Getgid()
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	attr.GidMappingsEnableSetgroups = false
}

// probe starts the helper once, with a network namespace when commands get
// no network and then without, and reports what it got.
func (s *Sandbox) probe() Status {
	abi := landlockABI()
	if abi < 1 {
		return Status{Reason: "Landlock is not available on this kernel (needs Linux 5.13 or later with the landlock LSM enabled)"}
	}
	var errs []string
	if !s.cfg.Network {
		got, err := s.runProbe(true)
		if err == nil {
			return Status{ABI: got, NetNamespace: true, Confined: true}
		}
		errs = append(errs, "with a network namespace: "+err.Error())
	}
	got, err := s.runProbe(false)
	if err == nil {
		return Status{ABI: got, Confined: true}
	}
	errs = append(errs, err.Error())
	return Status{ABI: abi, Reason: "the sandbox helper failed: " + strings.Join(errs, "; ")}
}

// runProbe starts the helper in probe mode and returns the ABI it applied.
func (s *Sandbox) runProbe(netns bool) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	p := policy{Read: systemRead(s.cfg.Network), Write: []string{s.workspace}, Network: s.cfg.Network, Probe: true}
	data, err := json.Marshal(p)
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, s.exe)
	cmd.Args = []string{helperName}
	cmd.Env = []string{policyEnv + "=" + string(data)}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if netns {
		netNamespace(cmd.SysProcAttr)
	}
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
