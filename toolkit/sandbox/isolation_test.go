//go:build linux

package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// needRoot skips a test of what a root tooldispatch gives away.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: this test checks what the sandbox takes from a root tooldispatch (CI runs as root)")
	}
}

// needUserNamespaces skips a test when this kernel refuses a child new user,
// mount and PID namespaces: the sandbox then has no PID namespace to give.
func needUserNamespaces(t *testing.T) {
	t.Helper()
	cmd := exec.Command("true")
	uid, gid := os.Getuid(), os.Getgid()
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		GidMappingsEnableSetgroups: false,
	}
	if err := cmd.Run(); err != nil {
		t.Skipf("no user namespaces on this host (%v): commands get no PID namespace here", err)
	}
}

// bothNetworkSettings runs f with [sandbox] network off and on.
func bothNetworkSettings(t *testing.T, f func(t *testing.T, cfg Config)) {
	for _, network := range []bool{false, true} {
		t.Run(fmt.Sprintf("network=%v", network), func(t *testing.T) { f(t, Config{Network: network}) })
	}
}

// TestHelperDropsCapabilities: a command of a root tooldispatch keeps no
// capability (bounding, effective, permitted, inheritable, ambient) and
// runs with no_new_privs, with and without network.
func TestHelperDropsCapabilities(t *testing.T) {
	needRoot(t)
	bothNetworkSettings(t, func(t *testing.T, cfg Config) {
		ws := t.TempDir()
		sb := confined(t, cfg, Options{Workspace: ws})
		out, err := run(t, sb, ws, "cat", "/proc/self/status")
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		want := map[string]string{
			"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
			"CapBnd": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1",
		}
		for _, line := range strings.Split(out, "\n") {
			key, value, _ := strings.Cut(line, ":")
			w, ok := want[key]
			if !ok {
				continue
			}
			if got := strings.TrimSpace(value); got != w {
				t.Errorf("%s = %s, want %s", key, got, w)
			}
			delete(want, key)
		}
		if len(want) > 0 {
			t.Fatalf("/proc/self/status lacks %v:\n%s", want, out)
		}
	})
}

// TestCommandSeesNoOtherProcess: where user namespaces work, a command
// runs in a PID namespace of its own with a /proc of that namespace: the
// process that started it (tooldispatch) does not exist for it, and it sees
// only the sandbox's init and itself; the init's memory and environment
// are closed to it. With and without network.
func TestCommandSeesNoOtherProcess(t *testing.T) {
	needUserNamespaces(t)
	bothNetworkSettings(t, func(t *testing.T, cfg Config) {
		ws := t.TempDir()
		sb := confined(t, cfg, Options{Workspace: ws})
		self := "/proc/" + strconv.Itoa(os.Getpid())
		for _, file := range []string{"environ", "maps", "cmdline", "status"} {
			out, err := run(t, sb, ws, "cat", self+"/"+file)
			if err == nil || !strings.Contains(out, "No such file or directory") {
				t.Errorf("cat %s/%s: %v: %.300q", self, file, err, out)
			}
		}
		out, err := run(t, sb, ws, "ls", "/proc")
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		var pids []string
		for _, name := range strings.Fields(out) {
			if _, err := strconv.Atoi(name); err == nil {
				pids = append(pids, name)
			}
		}
		if len(pids) != 2 || !slices.Contains(pids, "1") {
			t.Errorf("the command sees processes %v, want only the sandbox's init (1) and itself", pids)
		}
		for _, file := range []string{"environ", "mem", "maps"} {
			out, err := run(t, sb, ws, "head", "-c", "64", "/proc/1/"+file)
			if err == nil || !strings.Contains(out, "Permission denied") {
				t.Errorf("head /proc/1/%s (the sandbox's init): %v: %q", file, err, out)
			}
		}
	})
}

// TestCommandInheritsNoDescriptor: a descriptor that the process starting
// the command left open without close-on-exec (as a parent of tooldispatch
// may) does not reach the command.
func TestCommandInheritsNoDescriptor(t *testing.T) {
	ws := t.TempDir()
	marker := filepath.Join(t.TempDir(), "left-open-by-the-parent")
	if err := os.WriteFile(marker, []byte("inherited-descriptor-content\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// syscall.Open, unlike os.Open, leaves close-on-exec off.
	fd, err := syscall.Open(marker, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	bothNetworkSettings(t, func(t *testing.T, cfg Config) {
		sb := confined(t, cfg, Options{Workspace: ws})
		out, err := run(t, sb, ws, "ls", "-l", "/proc/self/fd/")
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if strings.Contains(out, marker) {
			t.Fatalf("descriptor %d of the parent reached the command:\n%s", fd, out)
		}
	})
}

// TestExitStatusThroughTheSandbox: the command's exit code, or the signal
// that killed it, is what the caller sees, whatever stages the sandbox
// puts between them.
func TestExitStatusThroughTheSandbox(t *testing.T) {
	bothNetworkSettings(t, func(t *testing.T, cfg Config) {
		ws := t.TempDir()
		sb := confined(t, cfg, Options{Workspace: ws})
		tests := []struct {
			script string
			code   int
			signal syscall.Signal
		}{
			{script: "exit 0"},
			{script: "exit 3", code: 3},
			{script: "exit 200", code: 200},
			{script: "kill -KILL $$", code: -1, signal: syscall.SIGKILL},
			{script: "kill -TERM $$", code: -1, signal: syscall.SIGTERM},
			{script: "kill -SEGV $$", code: -1, signal: syscall.SIGSEGV},
		}
		for _, tt := range tests {
			cmd := exec.Command("sh", "-c", tt.script)
			cmd.Dir = ws
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := sb.Wrap(cmd); err != nil {
				t.Fatal(err)
			}
			out, _ := cmd.CombinedOutput()
			st := cmd.ProcessState
			if st == nil {
				t.Fatalf("%s: did not run: %s", tt.script, out)
			}
			ws := st.Sys().(syscall.WaitStatus)
			if st.ExitCode() != tt.code || (tt.signal != 0 && (!ws.Signaled() || ws.Signal() != tt.signal)) {
				t.Errorf("%s: exit code %d, signal %v; want %d, %v; output %q", tt.script, st.ExitCode(), ws.Signal(), tt.code, tt.signal, out)
			}
		}
	})
}

// TestTermReachesTheCommand: SIGTERM to the command's process group (how
// tools stop a command at its timeout) reaches the command, which may
// handle it and end as it likes; the stages between stay until it has.
func TestTermReachesTheCommand(t *testing.T) {
	bothNetworkSettings(t, func(t *testing.T, cfg Config) {
		ws := t.TempDir()
		sb := confined(t, cfg, Options{Workspace: ws})
		cmd := exec.Command("sh", "-c", `trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.05; done`)
		cmd.Dir = ws
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := sb.Wrap(cmd); err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(out)
		if line, err := r.ReadString('\n'); line != "ready\n" {
			t.Fatalf("first line %q, %v", line, err)
		}
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(r)
		_ = cmd.Wait()
		if !strings.Contains(string(rest), "got-term") || cmd.ProcessState.ExitCode() != 7 {
			t.Fatalf("after SIGTERM: output %q, exit code %d", rest, cmd.ProcessState.ExitCode())
		}
	})
}

// TestEveryWayOfConfining: each way the probe may settle on (a PID and a
// network namespace, a network namespace alone, Landlock alone) confines
// the command, drops its capabilities, passes no stray descriptor, and
// hands back its exit code and signal.
func TestEveryWayOfConfining(t *testing.T) {
	ws := t.TempDir()
	marker := filepath.Join(t.TempDir(), "left-open")
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(marker, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	base := confined(t, Config{}, Options{Workspace: ws})
	ways := map[string]func(*Status){
		"PID and network namespaces": func(st *Status) {},
		"network namespace alone":    func(st *Status) { st.PIDNamespace = false },
		"Landlock alone":             func(st *Status) { st.PIDNamespace, st.NetNamespace = false, false },
	}
	for name, set := range ways {
		t.Run(name, func(t *testing.T) {
			if !base.Status().PIDNamespace && name != "Landlock alone" {
				t.Skip("no user namespaces on this host")
			}
			sb := confined(t, Config{}, Options{Workspace: ws})
			set(&sb.status)
			if out, err := run(t, sb, ws, "ls", "/"); err == nil || !strings.Contains(out, "Permission denied") {
				t.Errorf("ls /: %v: %q", err, out)
			}
			out, err := run(t, sb, ws, "ls", "-l", "/proc/self/fd/")
			if err != nil || strings.Contains(out, marker) {
				t.Errorf("descriptors: %v:\n%s", err, out)
			}
			if os.Geteuid() == 0 {
				out, err := run(t, sb, ws, "grep", "^Cap", "/proc/self/status")
				if err != nil || strings.Count(out, "0000000000000000") != 5 {
					t.Errorf("capabilities: %v:\n%s", err, out)
				}
			}
			for _, tt := range []struct {
				script string
				code   int
			}{{"exit 5", 5}, {"kill -SEGV $$", -1}} {
				cmd := exec.Command("sh", "-c", tt.script)
				cmd.Dir, cmd.Env = ws, []string{"PATH=/usr/bin:/bin"}
				if err := sb.Wrap(cmd); err != nil {
					t.Fatal(err)
				}
				_ = cmd.Run()
				if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != tt.code {
					t.Errorf("%s: %v", tt.script, cmd.ProcessState)
				}
			}
		})
	}
}
