package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runCommandTurns are two turns: one fetches run_command's schema, the
// next calls it through run_tool once per argv (ids c1, c2, …).
func runCommandTurns(t *testing.T, argvs ...[]string) string {
	t.Helper()
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	line := func(calls []call) string {
		b, err := json.Marshal(map[string]any{"role": "assistant", "tool_calls": calls})
		if err != nil {
			t.Fatal(err)
		}
		return string(b) + "\n"
	}
	var calls []call
	for i, argv := range argvs {
		args, err := json.Marshal(map[string]any{"name": "run_command", "arguments": map[string]any{"argv": argv}})
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, call{ID: fmt.Sprintf("c%d", i+1), Type: "function", Function: fn{Name: "run_tool", Arguments: string(args)}})
	}
	fetch := call{ID: "f1", Type: "function", Function: fn{Name: "find_tools", Arguments: `{"query":"select:run_command"}`}}
	return line([]call{fetch}) + line(calls)
}

// byID returns the results of a run by call id.
func byID(out runOutput) map[string]toolMessageJSON {
	m := map[string]toolMessageJSON{}
	for _, r := range out.results {
		m[r.ToolCallID] = r
	}
	return m
}

// TestRunCommandSandboxedEndToEnd: the tooldispatch binary, under
// --approve all and with no configuration, runs commands confined: an
// outside file cannot be read, a loopback server cannot be reached, the
// workspace can be written. [sandbox] network = true lets the connection
// through.
func TestRunCommandSandboxedEndToEnd(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash for /dev/tcp")
	}
	ws := exampleWorkspace(t)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("top-secret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	connect := "exec 3<>/dev/tcp/127.0.0.1/" + fmt.Sprint(ln.Addr().(*net.TCPAddr).Port) + " && echo connected"
	turn := runCommandTurns(t, []string{"cat", secret}, []string{bash, "-c", connect},
		[]string{"sh", "-c", "echo made > made.txt && ls"})

	code, stdout, stderr := execute(t, strings.NewReader(turn), "run", "--workspace", ws, "--data", t.TempDir(),
		"--approve", "all", "--shell", "--events=false", "-")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	if strings.Contains(stderr, "SANDBOX UNAVAILABLE") {
		t.Skipf("no sandbox on this host:\n%s", stderr)
	}
	res := byID(parseRunOutput(t, stdout))
	for id, want := range map[string]string{"c1": "error", "c2": "error", "c3": "ok"} {
		if res[id].Status != want {
			t.Fatalf("%s: status %q, want %q\n%s", id, res[id].Status, want, stdout)
		}
	}
	if strings.Contains(stdout, "top-secret-value") || strings.Contains(res["c2"].Content, "connected\n") {
		t.Fatalf("the sandbox let a command out:\n%s", stdout)
	}
	if !strings.Contains(res["c3"].Content, "made.txt") {
		t.Fatalf("the workspace write failed:\n%s", res["c3"].Content)
	}

	config := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(config, []byte("[sandbox]\nnetwork = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	turn = runCommandTurns(t, []string{bash, "-c", connect})
	code, stdout, stderr = execute(t, strings.NewReader(turn), "run", "--workspace", ws, "--data", t.TempDir(),
		"--config", config, "--approve", "all", "--shell", "--events=false", "-")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	if res := byID(parseRunOutput(t, stdout)); res["c1"].Status != "ok" || !strings.Contains(res["c1"].Content, "connected") {
		t.Fatalf("network = true did not let the connection through:\n%s", stdout)
	}
}

// TestDataInsideWorkspaceWarns: a data directory inside the workspace
// cannot be hidden from commands; start-up says so.
func TestDataInsideWorkspaceWarns(t *testing.T) {
	ws := exampleWorkspace(t)
	code, _, stderr := execute(t, strings.NewReader(""), "run", "--workspace", ws, "--data", filepath.Join(ws, ".td"), "-")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "SANDBOX CANNOT PROTECT") && !strings.Contains(stderr, "SANDBOX UNAVAILABLE") {
		t.Fatalf("no warning about the data directory inside the workspace:\n%s", stderr)
	}
}
