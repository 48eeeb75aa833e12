//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The helper's stages. Where namespaces are available a command runs
// under three processes of this binary's:
//
//	tooldispatch ─ outer ─ init (PID 1) ─ command (PID 2)
//
// The outer stage stays in tooldispatch's namespaces: it starts the init
// stage in new user, mount and PID namespaces (and network, without
// network), waits, and ends as the command ended, by the same exit code
// or the same signal. The init stage mounts a /proc of the new PID
// namespace, so that no other process exists for the command, confines
// its thread and starts the command from it, reaps whatever the command
// leaves, and reports the command's end to the outer stage; when it
// exits, the kernel kills what is left in the namespace. Without a PID
// namespace the outer stage starts the exec stage in a network namespace
// instead; without any namespace tooldispatch starts the exec stage
// itself, which confines itself and execs the command. The stages'
// names (policy.Stage) are in sandbox.go.

// reportFD is the init stage's descriptor for its report to the outer
// stage.
const reportFD = 3

// sigsetSize is the size of the kernel's signal set (rt_sigaction's
// last argument).
const sigsetSize = 8

// runOuter starts the next stage in the namespaces of p, waits for it and
// returns as the command ended: its exit code, or the same signal raised
// against this process.
func runOuter(p policy, argv []string) int {
	absorbSignals()
	next := p
	next.Stage = stageExec
	if p.PIDNamespace {
		next.Stage = stageInit
	}
	data, err := json.Marshal(next)
	if err != nil {
		return fail(exitSetup, "encoding the policy: %v", err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = append([]string{helperName}, argv...)
	cmd.Env = append(os.Environ(), policyEnv+"="+string(data))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = namespaces(p)
	var report *os.File
	if p.PIDNamespace {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(exitSetup, "%v", err)
		}
		report = r
		cmd.ExtraFiles = []*os.File{w} // reportFD in the init stage
	}
	err = cmd.Start()
	for _, f := range cmd.ExtraFiles {
		f.Close() // the init stage holds the only writer
	}
	if err != nil {
		return fail(exitSetup, "starting the sandbox's namespaces: %v", err)
	}
	var said []byte
	if report != nil {
		said, _ = io.ReadAll(io.LimitReader(report, 64))
		report.Close()
	}
	_ = cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if code, sig, ok := parseReport(string(said)); ok {
		return endAs(code, sig)
	}
	if ws.Signaled() {
		return endAs(0, ws.Signal())
	}
	return ws.ExitStatus()
}

// namespaces are the clone flags, identity maps and parent-death signal
// of the stage after the outer one. Its user keeps CAP_SYS_ADMIN (to mount
// /proc) and CAP_SETPCAP (to empty the bounding set) in the new user
// namespace across exec, whatever its uid; the init stage drops them
// before the command starts.
func namespaces(p policy) *syscall.SysProcAttr {
	uid, gid := os.Getuid(), os.Getgid()
	attr := &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		GidMappingsEnableSetgroups: false,
		// The outer stage's death (SIGKILL) takes the sandbox with it.
		Pdeathsig: syscall.SIGKILL,
	}
	if p.PIDNamespace {
		attr.Cloneflags |= syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP}
	}
	if p.NetNamespace {
		attr.Cloneflags |= syscall.CLONE_NEWNET
	}
	return attr
}

// runInit is PID 1 of the sandbox's PID namespace: it mounts the
// namespace's /proc, confines its thread, starts the command from it,
// reaps every process until the command ends, and reports the end on
// reportFD.
func runInit(p policy, argv []string) int {
	report := os.NewFile(reportFD, "report")
	absorbSignals()
	// This process keeps its capabilities in the sandbox's user namespace
	// on its other threads: nothing in the sandbox may read its memory or
	// trace it.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return tell(report, fail(exitSetup, "%v", err))
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return tell(report, fail(exitSetup, "making the sandbox's mounts private: %v", err))
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return tell(report, fail(exitSetup, "mounting /proc for the sandbox's PID namespace: %v", err))
	}
	abi, err := confine(p)
	if err != nil {
		return tell(report, fail(exitSetup, "%v", err))
	}
	if p.Probe {
		if err := probeChecks(true); err != nil {
			return tell(report, fail(exitSetup, "%v", err))
		}
		fmt.Printf("abi=%d\n", abi)
		return tell(report, 0)
	}
	// ForkExec clones this (confined) thread.
	pid, err := syscall.ForkExec(p.Path, argv, &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}})
	if err != nil {
		return tell(report, execFailed(p.Path, err))
	}
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return tell(report, fail(exitSetup, "waiting for the command: %v", err))
		case got != pid:
			continue // an orphan the command left
		case ws.Signaled():
			fmt.Fprintf(report, "signal %d", int(ws.Signal()))
			return 128 + int(ws.Signal())
		}
		return tell(report, ws.ExitStatus())
	}
}

// tell reports exit code code to the outer stage and returns it.
func tell(report io.Writer, code int) int {
	fmt.Fprintf(report, "exit %d", code)
	return code
}

// parseReport reads the init stage's report: "exit N" or "signal N".
func parseReport(s string) (code int, sig syscall.Signal, ok bool) {
	kind, num, found := strings.Cut(s, " ")
	n, err := strconv.Atoi(num)
	if !found || err != nil || n < 0 {
		return 0, 0, false
	}
	switch kind {
	case "exit":
		return n, 0, true
	case "signal":
		return 0, syscall.Signal(n), n > 0
	}
	return 0, 0, false
}

// endAs returns code, or, for a signal, ends this process by it so that
// its parent sees what the command saw. A signal whose default action
// does not end a process falls back to 128+signal, as a shell reports it.
func endAs(code int, sig syscall.Signal) int {
	if sig == 0 {
		return code
	}
	// No core file of this stage in the command's directory.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	signal.Reset(sig)
	// The Go runtime keeps its own handler for some signals (SIGSEGV,
	// SIGQUIT…); the kernel's default action is what ends the process.
	var dfl [4]uint64 // struct sigaction with SIG_DFL, no flags, no mask
	_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, sigsetSize, 0, 0)
	_ = unix.Tgkill(os.Getpid(), unix.Gettid(), sig)
	return 128 + int(sig)
}

// absorbSignals keeps the termination signals from ending this stage:
// they reach the command's whole process group, the command included,
// and this stage ends when the command does.
func absorbSignals() {
	c := make(chan os.Signal, 16)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	go func() {
		for range c {
		}
	}()
}
