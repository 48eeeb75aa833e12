package builtin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/toolkit/sandbox"
)

// sandboxed returns a configure function that confines run_command with a
// sandbox of cfg for the test's workspace. It skips the test only on a
// kernel without Landlock.
func sandboxed(t *testing.T, cfg sandbox.Config) func(*Deps) {
	t.Helper()
	return func(d *Deps) {
		t.Helper()
		sb, err := sandbox.New(cfg, sandbox.Options{Workspace: d.Workspace.Dir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := sb.Close(); err != nil {
				t.Errorf("closing the sandbox: %v", err)
			}
		})
		st := sb.Status()
		if st.ABI == 0 {
			t.Skipf("no Landlock on this kernel: %s", st.Reason)
		}
		if !st.Confined {
			t.Fatalf("Landlock ABI %d but no sandbox: %s", st.ABI, st.Reason)
		}
		d.Sandbox = sb
	}
}

// loopback is a TCP listener on 127.0.0.1 that never accepts by itself.
func loopback(t *testing.T) *net.TCPListener {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.(*net.TCPListener)
}

// connected reports whether a connection reached ln: a connect that
// succeeded before the command ended waits in the accept queue, so one
// non-blocking accept tells.
func connected(t *testing.T, ln *net.TCPListener) bool {
	t.Helper()
	raw, err := ln.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var acceptErr error
	// The listener's descriptor is non-blocking: accept never waits.
	err = raw.Control(func(fd uintptr) {
		var nfd int
		nfd, _, acceptErr = syscall.Accept(int(fd))
		if acceptErr == nil {
			syscall.Close(nfd)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case acceptErr == nil:
		return true
	case errors.Is(acceptErr, syscall.EAGAIN):
		return false
	}
	t.Fatalf("accept: %v", acceptErr)
	return false
}

// connectArgs is a run_command that opens a TCP connection to ln.
func connectArgs(t *testing.T, ln *net.TCPListener) string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash for /dev/tcp")
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return jsonArgs(t, map[string]any{"argv": []string{bash, "-c", "exec 3<>/dev/tcp/127.0.0.1/" + strconv.Itoa(port) + " && echo connected"}})
}

// TestRunCommandSandboxConfines: under the sandbox a command cannot read or
// write outside the workspace, nor connect to a loopback server; inside
// the workspace it works as before.
func TestRunCommandSandboxConfines(t *testing.T) {
	e := newTestEnv(t, sandboxed(t, sandbox.Config{}), shellOn)
	secret := filepath.Join(e.outside, "secret.txt")

	t.Run("outside read refused", func(t *testing.T) {
		out, err := e.call("run_command", jsonArgs(t, map[string]any{"argv": []string{"cat", secret}}))
		if err == nil || strings.Contains(out+err.Error(), "secret\n") {
			t.Fatalf("read a file outside the workspace: out %q, err %v", out, err)
		}
		wantErr(t, err, "Permission denied")
	})
	t.Run("outside listing refused", func(t *testing.T) {
		_, err := e.call("run_command", jsonArgs(t, map[string]any{"argv": []string{"ls", e.outside}}))
		if err == nil || strings.Contains(err.Error(), "secret.txt") {
			t.Fatalf("listed a directory outside the workspace: %v", err)
		}
	})
	t.Run("outside write refused", func(t *testing.T) {
		target := filepath.Join(e.outside, "planted.txt")
		_, err := e.call("run_command", jsonArgs(t, map[string]any{"argv": []string{"sh", "-c", "echo x > " + target}}))
		wantErr(t, err, "Permission denied")
		if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a file was written outside the workspace: %v", err)
		}
		_, err = e.call("run_command", jsonArgs(t, map[string]any{"argv": []string{"rm", secret}}))
		wantErr(t, err, "Permission denied")
		if _, err := os.Stat(secret); err != nil {
			t.Fatalf("a file outside the workspace was removed: %v", err)
		}
	})
	t.Run("shared tmp refused", func(t *testing.T) {
		_, err := e.call("run_command", `{"argv":["sh","-c","echo x > /tmp/tooldispatch-sandbox-probe-$$"]}`)
		wantErr(t, err, "Permission denied")
	})
	t.Run("loopback connection refused", func(t *testing.T) {
		ln := loopback(t)
		out, err := e.call("run_command", connectArgs(t, ln))
		if err == nil || strings.Contains(out, "connected") {
			t.Fatalf("connected to a loopback server: out %q, err %v", out, err)
		}
		if connected(t, ln) {
			t.Fatal("the loopback server got a connection")
		}
	})
	t.Run("workspace write and ls work", func(t *testing.T) {
		out, err := e.call("run_command", `{"argv":["sh","-c","mkdir -p sub && echo made > sub/made.txt && mv sub/made.txt moved.txt && ls"]}`)
		wantContent(t, out, err, "exit code 0", "moved.txt")
		if got, ok := e.read("moved.txt"); !ok || got != "made\n" {
			t.Fatalf("moved.txt = %q, %v", got, ok)
		}
		out, err = e.call("run_command", `{"argv":["ls","-la","/usr/bin/env"]}`)
		wantContent(t, out, err, "exit code 0", "/usr/bin/env")
	})
	t.Run("private temp directory", func(t *testing.T) {
		out, err := e.call("run_command", `{"argv":["sh","-c","test -n \"$TMPDIR\" && echo t > \"$TMPDIR/x\" && cat \"$TMPDIR/x\" && echo home=$HOME && test -n \"$TMPDIR\" && stat -c %a \"$TMPDIR\" && echo ok > /dev/null"]}`)
		wantContent(t, out, err, "exit code 0", "t\n", "700\n")
		if strings.Contains(out, "home=/\n") || strings.Contains(out, "home="+e.dir) {
			t.Fatalf("HOME is not the private temp directory:\n%s", out)
		}
	})
}

// TestRunCommandSandboxNetworkAllowed: with [sandbox] network = true the
// same connection goes through (so the refusal above is the sandbox's).
func TestRunCommandSandboxNetworkAllowed(t *testing.T) {
	e := newTestEnv(t, sandboxed(t, sandbox.Config{Network: true}), shellOn)
	ln := loopback(t)
	out, err := e.call("run_command", connectArgs(t, ln))
	wantContent(t, out, err, "connected")
	if !connected(t, ln) {
		t.Fatal("the loopback server got no connection")
	}
}

// TestRunCommandSandboxListedPaths: [sandbox] read and write open more
// paths, read-only and read-write.
func TestRunCommandSandboxListedPaths(t *testing.T) {
	base := t.TempDir()
	ro, rw := filepath.Join(base, "ro"), filepath.Join(base, "rw")
	for _, d := range []string{ro, rw} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(ro, "ref.txt"), "reference\n")
	e := newTestEnv(t, sandboxed(t, sandbox.Config{Read: []string{ro}, Write: []string{rw}}), shellOn)

	out, err := e.call("run_command", jsonArgs(t, map[string]any{"argv": []string{"cat", filepath.Join(ro, "ref.txt")}}))
	wantContent(t, out, err, "reference")
	_, err = e.call("run_command", jsonArgs(t, map[string]any{"argv": []string{"touch", filepath.Join(ro, "new.txt")}}))
	wantErr(t, err, "Permission denied")
	out, err = e.call("run_command", jsonArgs(t, map[string]any{"argv": []string{"sh", "-c", "echo w > " + filepath.Join(rw, "w.txt")}}))
	wantContent(t, out, err, "exit code 0")
	if b, err := os.ReadFile(filepath.Join(rw, "w.txt")); err != nil || string(b) != "w\n" {
		t.Fatalf("w.txt = %q, %v", b, err)
	}
}

// TestRunCommandSandboxKeepsProcessGroupKill: the timeout still ends the
// whole process group, and output still streams, under the sandbox. The
// timeout leaves the sandbox helper ample time to start on a loaded machine.
// In the sandbox's PID namespace the command cannot learn its children's
// process ids as tooldispatch sees them: the background child is found by
// its command line, a sleep of a duration no other process has.
func TestRunCommandSandboxKeepsProcessGroupKill(t *testing.T) {
	e := newTestEnv(t, sandboxed(t, sandbox.Config{}), shellOn)
	var got emitted
	duration := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1000000)
	_, err := e.callCtx(context.Background(), "run_command",
		`{"shell":"sleep `+duration+` & kill -0 $! && echo started; wait","timeout_ms":5000}`, got.emit)
	wantErr(t, err, "timed out", "started")
	if pids := runningWithArgs("sleep", duration); len(pids) > 0 {
		t.Fatalf("background child %v survived the timeout", pids)
	}
	if joined := strings.Join(got.all(), ""); !strings.Contains(joined, "started\n") {
		t.Fatalf("streamed %q", joined)
	}
}

// TestRunCommandSandboxRequired: where no sandbox can be had, required
// refuses commands; otherwise they run unconfined after one loud warning.
func TestRunCommandSandboxRequired(t *testing.T) {
	// A helper binary that is not one stands in for a kernel without
	// Landlock: the start-up probe fails.
	notHelper, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1)")
	}
	for _, required := range []bool{true, false} {
		var logs bytes.Buffer
		var sb *sandbox.Sandbox
		e := newTestEnv(t, func(d *Deps) {
			sb, err = sandbox.New(sandbox.Config{Required: required},
				sandbox.Options{Workspace: d.Workspace.Dir(), Executable: notHelper, Logger: zerolog.New(&logs)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sb.Close() })
			d.Sandbox = sb
		}, shellOn)
		if sb.Status().Confined {
			t.Fatal("a sandbox without a helper claims to confine")
		}
		if n := strings.Count(logs.String(), "SANDBOX UNAVAILABLE"); n != 1 {
			t.Fatalf("want one start-up warning, got %d:\n%s", n, logs.String())
		}
		out, err := e.call("run_command", `{"argv":["sh","-c","echo ran > ran.txt"]}`)
		_, ran := e.read("ran.txt")
		if required {
			wantErr(t, err, "required = true")
			if ran {
				t.Fatal("a command ran although the sandbox is required and unavailable")
			}
			continue
		}
		wantContent(t, out, err, "exit code 0")
		if !ran {
			t.Fatal("the command did not run")
		}
	}
}

// TestRunCommandSandboxBuildsGo: a small Go module in the workspace builds
// and tests under the sandbox. The Go build cache is listed as a [sandbox]
// write path, as an operator would to keep it warm; without it the cache
// lands in the private temp directory (HOME) and the first build compiles
// the standard library anew.
func TestRunCommandSandboxBuildsGo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command several times")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH")
	}
	goEnv := func(key string) string {
		out, err := exec.Command(goBin, "env", key).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", key, err)
		}
		return strings.TrimSpace(string(out))
	}
	root, cache := goEnv("GOROOT"), goEnv("GOCACHE")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t, sandboxed(t, sandbox.Config{Read: []string{root}, Write: []string{cache}}))
	e.write("go.mod", "module example.com/tiny\n\ngo 1.22\n")
	e.write("tiny.go", "package main\n\nimport \"fmt\"\n\nfunc Double(n int) int { return 2 * n }\n\nfunc main() { fmt.Println(Double(21)) }\n")
	e.write("tiny_test.go", "package main\n\nimport \"testing\"\n\nfunc TestDouble(t *testing.T) {\n\tif Double(2) != 4 {\n\t\tt.Fatal(\"bad\")\n\t}\n}\n")
	goCmd := func(args ...string) string {
		return jsonArgs(t, map[string]any{"argv": append([]string{"env", "GOCACHE=" + cache, goBin}, args...)})
	}

	out, err := e.call("run_command", goCmd("build", "-o", "tiny", "."))
	wantContent(t, out, err, "exit code 0")
	out, err = e.call("run_command", `{"argv":["./tiny"]}`)
	wantContent(t, out, err, "42")
	out, err = e.call("run_command", goCmd("test", "-count=1", "./..."))
	wantContent(t, out, err, "exit code 0", "ok")
	t.Logf("go test in the sandbox:\n%s", out)
	out, err = e.call("run_command", goCmd("vet", "./..."))
	wantContent(t, out, err, "exit code 0")
}
