package script

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/sandbox"
)

// peekScript tries what a confined program must not do, and one thing it
// may; each line reports only what succeeded.
const peekScript = `#!/bin/sh
cat "$(dirname "$0")/tools.toml" >/dev/null 2>&1 && echo READ-MANIFEST
cat "$SECRET" >/dev/null 2>&1 && echo READ-SECRET
(echo x > "$PLANT") 2>/dev/null && echo WROTE-OUTSIDE
bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null && echo CONNECTED
echo ok > "$TOOLDISPATCH_WORKSPACE/ok.txt" && echo WORKSPACE-OK
`

// TestScriptToolSandboxed: a script tool declared by the operator runs
// confined: it runs its own file, but cannot read the manifest next to it
// or a file elsewhere, write outside the workspace, or connect to a
// loopback server; it writes in the workspace.
func TestScriptToolSandboxed(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash for /dev/tcp")
	}
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	toolsDir := filepath.Join(base, "operator-tools")
	secret := filepath.Join(base, "secret.txt")
	plant := filepath.Join(base, "planted.txt")
	writeFile(t, secret, "secret\n", 0o600)
	writeFile(t, filepath.Join(ws, "README"), "workspace\n", 0o644)
	writeFile(t, filepath.Join(toolsDir, "peek.sh"), peekScript, 0o755)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	manifest := `
[[tools]]
name = "peek"
description = "Tries things."
command = ["./peek.sh"]
env = { SECRET = "` + secret + `", PLANT = "` + plant + `", PORT = "` + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port) + `" }
`
	writeFile(t, filepath.Join(toolsDir, "tools.toml"), manifest, 0o644)

	sb, err := sandbox.New(sandbox.Config{}, sandbox.Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if st := sb.Status(); !st.Confined {
		if st.ABI == 0 {
			t.Skipf("no Landlock on this kernel: %s", st.Reason)
		}
		t.Fatalf("Landlock ABI %d but no sandbox: %s", st.ABI, st.Reason)
	}
	reg := toolkit.NewRegistry()
	cfg := Config{Script: ScriptConfig{Manifests: []ManifestRef{{Path: filepath.Join(toolsDir, "tools.toml"), Trusted: true}}},
		Sandbox: sb}
	if _, err := Register(reg, cfg, ws, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	out, err := call(t, context.Background(), reg, "script_peek", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "WORKSPACE-OK") {
		t.Fatalf("the script could not write in the workspace:\n%s", out)
	}
	for _, bad := range []string{"READ-MANIFEST", "READ-SECRET", "WROTE-OUTSIDE", "CONNECTED"} {
		if strings.Contains(out, bad) {
			t.Errorf("the sandboxed script could do %s:\n%s", bad, out)
		}
	}
	if _, err := os.Stat(plant); err == nil {
		t.Error("a file was written outside the workspace")
	}
	// A connection that went through would wait in the accept queue.
	raw, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var acceptErr error
	if err := raw.Control(func(fd uintptr) {
		var nfd int
		if nfd, _, acceptErr = syscall.Accept(int(fd)); acceptErr == nil {
			syscall.Close(nfd)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if acceptErr == nil {
		t.Error("the loopback server got a connection")
	}
}
