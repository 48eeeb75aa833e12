package sandbox

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// confined returns a sandbox for workspace, skipping on a kernel without
// Landlock.
func confined(t *testing.T, cfg Config, o Options) *Sandbox {
	t.Helper()
	sb, err := New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	if st := sb.Status(); !st.Confined {
		if st.ABI == 0 {
			t.Skipf("no Landlock on this kernel: %s", st.Reason)
		}
		t.Fatalf("Landlock ABI %d but no sandbox: %s", st.ABI, st.Reason)
	}
	return sb
}

// run wraps and runs argv in dir and returns its combined output.
func run(t *testing.T, sb *Sandbox, dir string, argv ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sb.Wrap(cmd); err != nil {
		return "", err
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "empty", cfg: Config{}},
		{name: "absolute", cfg: Config{Read: []string{"/srv"}, Write: []string{"/var/cache"}}},
		{name: "relative read", cfg: Config{Read: []string{"srv"}}, want: "sandbox.read[0]"},
		{name: "empty write", cfg: Config{Write: []string{"/a", ""}}, want: "sandbox.write[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error naming %s", err, tt.want)
			}
		})
	}
	if _, err := New(Config{Read: []string{filepath.Join(t.TempDir(), "missing")}}, Options{Workspace: t.TempDir()}); err == nil ||
		!strings.Contains(err.Error(), "sandbox.read[0]") {
		t.Fatalf("a missing read path: got %v", err)
	}
}

// TestProtectedInsideAllowedTree: a data directory inside the workspace
// cannot be hidden from commands; New says so loudly, and with required
// commands are refused.
func TestProtectedInsideAllowedTree(t *testing.T) {
	ws := t.TempDir()
	data := filepath.Join(ws, ".tooldispatch")
	outside := filepath.Join(t.TempDir(), "data")
	for _, required := range []bool{false, true} {
		var logs bytes.Buffer
		sb := confined(t, Config{Required: required}, Options{Workspace: ws, Protected: []string{data, outside},
			Logger: zerolog.New(&logs)})
		if got := sb.Status().Exposed; len(got) != 1 || got[0] != data {
			t.Fatalf("exposed = %q, want only %s", got, data)
		}
		if !strings.Contains(logs.String(), "SANDBOX CANNOT PROTECT") || !strings.Contains(logs.String(), data) {
			t.Fatalf("no warning naming %s:\n%s", data, logs.String())
		}
		_, err := run(t, sb, ws, "true")
		if required && !errors.Is(err, ErrUnavailable) {
			t.Fatalf("required: got %v, want ErrUnavailable", err)
		}
		if !required && err != nil {
			t.Fatalf("not required: %v", err)
		}
	}
}

// TestTempDirPrivateAndRemoved: the private temp directory is 0700,
// shared by the sandbox's commands, and gone after Close; Wrap refuses
// after Close.
func TestTempDirPrivateAndRemoved(t *testing.T) {
	ws := t.TempDir()
	sb := confined(t, Config{}, Options{Workspace: ws, TempBase: t.TempDir()})
	out, err := run(t, sb, ws, "sh", "-c", `mkdir -p "$TMPDIR/ro" && touch "$TMPDIR/ro/f" && chmod 500 "$TMPDIR/ro" && echo "$TMPDIR"`)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	tmp := strings.TrimSpace(out)
	fi, err := os.Stat(tmp)
	if err != nil || fi.Mode().Perm() != tempDirMode {
		t.Fatalf("temp dir %s: %v, mode %v", tmp, err, fi)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temp dir left after Close: %v", err)
	}
	if _, err := run(t, sb, ws, "true"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wrap after Close: %v", err)
	}
}

// TestHelperMessages: a program the sandbox may not execute, or one that
// does not exist, fails with a message that says so; the policy variable
// does not reach the program.
func TestHelperMessages(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	prog := filepath.Join(outside, "prog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sb := confined(t, Config{}, Options{Workspace: ws})
	out, err := run(t, sb, ws, prog)
	if err == nil || !strings.Contains(out, messagePrefix) || !strings.Contains(out, "[sandbox] read") {
		t.Fatalf("running a program outside: %v: %q", err, out)
	}
	out, err = run(t, sb, ws, "env")
	if err != nil || strings.Contains(out, policyEnv) {
		t.Fatalf("env: %v: %q", err, out)
	}
}

func TestNilSandboxLeavesCommandAlone(t *testing.T) {
	var sb *Sandbox
	cmd := exec.Command("true")
	if err := sb.Wrap(cmd); err != nil || cmd.Args[0] != "true" {
		t.Fatalf("Wrap on nil: %v, %q", err, cmd.Args)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestNetNamespace: without network, a command sees no interface but
// loopback (so UDP and other protocols Landlock does not cover are cut
// too), where user namespaces are available.
func TestNetNamespace(t *testing.T) {
	ws := t.TempDir()
	sb := confined(t, Config{}, Options{Workspace: ws})
	if !sb.Status().NetNamespace {
		t.Skip("no user namespaces here: Landlock alone restricts TCP")
	}
	out, err := run(t, sb, ws, "cat", "/proc/net/dev")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		name, _, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && name != "lo" {
			t.Fatalf("interface %s visible in the sandbox:\n%s", name, out)
		}
	}
}

// TestStaleTempDirsSwept: the private temp directory of a process that is
// gone (killed before Close) is removed when the next one is made; one of
// a running process stays.
func TestStaleTempDirsSwept(t *testing.T) {
	base := t.TempDir()
	ws := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(base, tempPrefix+strconv.Itoa(gone.Process.Pid)+"-1")
	live := filepath.Join(base, tempPrefix+strconv.Itoa(os.Getppid())+"-2")
	for _, d := range []string{filepath.Join(stale, "sub"), live} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sb := confined(t, Config{}, Options{Workspace: ws, TempBase: base})
	if out, err := run(t, sb, ws, "true"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale temp dir kept: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("a running process's temp dir was removed: %v", err)
	}
}
