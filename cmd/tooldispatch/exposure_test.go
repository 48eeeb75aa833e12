package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// needRoot skips a test of what a root tooldispatch gives away.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: this test checks what a root tooldispatch exposes to its commands (CI runs as root)")
	}
}

// userNamespaces reports whether this kernel gives a child new user, mount
// and PID namespaces (the sandbox then hides tooldispatch's process).
func userNamespaces() bool {
	cmd := exec.Command("true")
	uid, gid := os.Getuid(), os.Getgid()
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
	}
	return cmd.Run() == nil
}

// randomText is a value no test file or log line holds by chance.
func randomText(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// shellCall is a run_command call of a command line (shell mode).
func shellCall(id, line string) string {
	args, _ := json.Marshal(map[string]any{"shell": line})
	q, _ := json.Marshal(string(args))
	return fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":"run_command","arguments":%s}}`, id, q)
}

// searchScript looks for each needle in every place a command may read
// where a secret could be left: the environment and command line of every
// process it sees, its home and temp directories, the workspace, /tmp,
// /dev/shm, /run and /etc. The needles travel base64-encoded, so the
// script's own command line holds none of them; it prints "FOUND in …"
// for each hit and "searched" at the end.
func searchScript(needles ...string) string {
	var enc []string
	for _, n := range needles {
		enc = append(enc, base64.StdEncoding.EncodeToString([]byte(n)))
	}
	return `for n in ` + strings.Join(enc, " ") + `; do
  v=$(printf %s "$n" | base64 -d)
  for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline /proc/[0-9]*/task/[0-9]*/environ; do
    if cat "$f" 2>/dev/null | grep -qaF -- "$v"; then echo "FOUND in $f"; fi
  done
  for d in "$HOME" "$TMPDIR" "$PWD" /tmp /dev/shm /run /etc; do
    grep -rlaF -- "$v" "$d" 2>/dev/null | sed 's/^/FOUND in /'
  done
done
echo searched`
}

// noSecret fails when text holds one of the secrets.
func noSecret(t *testing.T, what, text string, secrets map[string]string) {
	t.Helper()
	for name, v := range secrets {
		if strings.Contains(text, v) {
			t.Errorf("%s shows %s:\n%.2000s", what, name, text)
		}
	}
}

// TestSandboxedCommandSeesNoSecret: a root tooldispatch serve with [sandbox]
// network = true, a token and a PostgreSQL URL on its command line, the
// secrets' key, a token, a database URL and a database password in its
// environment, and a descriptor its parent left open. No sandboxed command
// reads /proc/<tooldispatch>/environ, maps or cmdline, finds any of the
// secrets anywhere it may read, or gets the open descriptor; tooldispatch's
// own environment and command line no longer hold the secrets once it
// serves, and its descriptors are close-on-exec.
func TestSandboxedCommandSeesNoSecret(t *testing.T) {
	needRoot(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	secrets := map[string]string{
		"TOOLDISPATCH_SECRET_KEY": base64.StdEncoding.EncodeToString(key),
		"TOOLDISPATCH_TOKEN":      randomText("env-token-"),
		"TOOLDISPATCH_PG_URL":     randomText("env-pg-password-"),
		"PGPASSWORD":              randomText("pgpassword-"),
		"--token":                 randomText("argv-token-"),
		"--postgres":              randomText("argv-pg-password-"),
	}
	env := append(os.Environ(),
		"TOOLDISPATCH_SECRET_KEY="+secrets["TOOLDISPATCH_SECRET_KEY"],
		"TOOLDISPATCH_TOKEN="+secrets["TOOLDISPATCH_TOKEN"],
		"TOOLDISPATCH_PG_URL=postgres://td:"+secrets["TOOLDISPATCH_PG_URL"]+"@127.0.0.1:9/td",
		"PGPASSWORD="+secrets["PGPASSWORD"])
	token := secrets["--token"]
	marker := filepath.Join(t.TempDir(), "left-open-by-the-parent")
	if err := os.WriteFile(marker, []byte("inherited-descriptor-content\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open, err := os.Open(marker)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	ws := t.TempDir()
	cfg := writeConfig(t, "[sandbox]\nnetwork = true\n")
	s := startServeWith(t, func(c *exec.Cmd) {
		c.Env = env
		c.ExtraFiles = []*os.File{open} // descriptor 3, inheritable
	}, "--workspace", ws, "--data", t.TempDir(), "--approve", "all", "--shell", "--config", cfg,
		"--token", token, "--postgres", "postgres://td:"+secrets["--postgres"]+"@127.0.0.1:9/td")
	s.mu.Lock()
	if strings.Contains(s.stderr.String(), "SANDBOX UNAVAILABLE") {
		s.mu.Unlock()
		t.Skip("no sandbox on this host")
	}
	s.mu.Unlock()
	pid := strconv.Itoa(s.pid)
	hidden := userNamespaces()

	code, messages := s.turnWithToken(t, token, "exposure", envelope(`"provider":"claude-code","auto_load_schemas":true`,
		commandCall("environ", "cat", "/proc/"+pid+"/environ"),
		commandCall("maps", "cat", "/proc/"+pid+"/maps"),
		commandCall("cmdline", "cat", "/proc/"+pid+"/cmdline"),
		shellCall("search", searchScript(secrets["TOOLDISPATCH_SECRET_KEY"], secrets["TOOLDISPATCH_TOKEN"],
			secrets["TOOLDISPATCH_PG_URL"], secrets["PGPASSWORD"], secrets["--token"], secrets["--postgres"])),
		commandCall("fds", "ls", "-l", "/proc/self/fd/"),
		shellCall("fd3", "cat <&3")))
	if code != http.StatusOK {
		t.Fatalf("POST turns: %d %v", code, messages)
	}
	res := byID(runOutput{results: messages})
	for id, r := range res {
		noSecret(t, "the result of "+id, r.Content, secrets)
	}

	for _, file := range []string{"environ", "maps", "cmdline"} {
		t.Run("/proc/tooldispatch/"+file, func(t *testing.T) {
			r := res[file]
			if file != "cmdline" && r.Status == "ok" {
				t.Errorf("a command read tooldispatch's %s:\n%.1000s", file, r.Content)
			}
			if hidden && !strings.Contains(r.Content, "No such file or directory") {
				t.Errorf("tooldispatch's process is visible to a command (%s): %.1000s", r.Status, r.Content)
			}
		})
	}
	t.Run("search", func(t *testing.T) {
		r := res["search"]
		if r.Status != "ok" || !strings.Contains(r.Content, "searched") || strings.Contains(r.Content, "FOUND") {
			t.Errorf("a command found a secret (%s):\n%.2000s", r.Status, r.Content)
		}
	})
	t.Run("inherited descriptor", func(t *testing.T) {
		if r := res["fds"]; r.Status != "ok" || strings.Contains(r.Content, marker) {
			t.Errorf("descriptor 3 left open by tooldispatch's parent reached a command (%s):\n%s", r.Status, r.Content)
		}
		if r := res["fd3"]; r.Status == "ok" || strings.Contains(r.Content, "inherited-descriptor-content") {
			t.Errorf("a command read descriptor 3 (%s):\n%s", r.Status, r.Content)
		}
	})
	t.Run("own environment and command line", func(t *testing.T) {
		for _, file := range []string{"environ", "cmdline"} {
			b, err := os.ReadFile("/proc/" + pid + "/" + file)
			if err != nil {
				t.Fatal(err)
			}
			noSecret(t, "tooldispatch's /proc/"+file, string(b), secrets)
		}
	})
	t.Run("close-on-exec", func(t *testing.T) {
		entries, err := os.ReadDir("/proc/" + pid + "/fd")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			fd, err := strconv.Atoi(e.Name())
			if err != nil || fd <= 2 {
				continue
			}
			info, err := os.ReadFile("/proc/" + pid + "/fdinfo/" + e.Name())
			if err != nil {
				continue // closed meanwhile
			}
			for _, line := range strings.Split(string(info), "\n") {
				if v, ok := strings.CutPrefix(line, "flags:"); ok {
					flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
					if err != nil || flags&syscall.O_CLOEXEC == 0 {
						target, _ := os.Readlink("/proc/" + pid + "/fd/" + e.Name())
						t.Errorf("descriptor %d (%s) of tooldispatch is not close-on-exec (flags %s)", fd, target, strings.TrimSpace(v))
					}
				}
			}
		}
	})
}

// TestHardLinkedKeyRefusesStart: a hard link to the secrets' key file made
// where commands may read (here the workspace, by an earlier unconfined
// command) makes tooldispatch refuse to start, naming the key file and its
// link count, so no command reads the key through it.
func TestHardLinkedKeyRefusesStart(t *testing.T) {
	ws, data := t.TempDir(), t.TempDir()
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TOOLDISPATCH_SECRET_KEY=") {
			env = append(env, kv)
		}
	}
	run := func(input string, args ...string) (int, string, string) {
		cmd := command(t, strings.NewReader(input), append([]string{"run", "--workspace", ws, "--data", data}, args...)...)
		cmd.Env = env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	if code, _, stderr := run(""); code != exitOK {
		t.Fatalf("first start: exit %d\n%s", code, stderr)
	}
	keyFile := filepath.Join(data, "secret.key")
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Link(keyFile, filepath.Join(ws, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(runCommandTurns(t, []string{"cat", "notes.txt"}), "--approve", "all", "--events=false", "-")
	if strings.Contains(stdout, strings.TrimSpace(string(key))) {
		t.Fatalf("a command read the key through its hard link in the workspace:\n%s", stdout)
	}
	if code == exitOK {
		t.Fatalf("tooldispatch started with a key file of 2 links:\n%s", stdout)
	}
	for _, want := range []string{keyFile, "2 links"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the message does not name %q:\n%s", want, stderr)
		}
	}
}

// TestShellInArgvNeedsShellFlag: sh -c in argv is refused without --shell
// and runs with it.
func TestShellInArgvNeedsShellFlag(t *testing.T) {
	ws := t.TempDir()
	turn := runCommandTurns(t, []string{"sh", "-c", "echo made > made.txt"})
	for _, shell := range []bool{false, true} {
		args := []string{"run", "--workspace", ws, "--data", t.TempDir(), "--approve", "all", "--events=false"}
		if shell {
			args = append(args, "--shell")
		}
		code, stdout, stderr := execute(t, strings.NewReader(turn), append(args, "-")...)
		if code != exitOK {
			t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
		}
		r := byID(parseRunOutput(t, stdout))["c1"]
		_, err := os.Stat(filepath.Join(ws, "made.txt"))
		if shell != (err == nil) || (r.Status == "ok") != shell {
			t.Fatalf("--shell=%v: made.txt %v, status %s: %s", shell, err, r.Status, r.Content)
		}
		if !shell && !strings.Contains(r.Content, "shell mode is disabled") {
			t.Fatalf("refused for another reason: %s", r.Content)
		}
	}
}

// TestServeSecretsFromFiles: --token-file gives serve its token, which
// every request then needs; --postgres-file and $TOOLDISPATCH_PG_URL give
// the cluster's PostgreSQL URL; a secret given twice, a missing file and an
// empty one are usage errors that name the file.
func TestServeSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tokenFile := write("token", "file-token-1234\n")
	pgFile := write("pg", "postgres://td:pw@127.0.0.1:9/td\n")
	empty := write("empty", "\n")

	t.Run("token file", func(t *testing.T) {
		s := startServeWith(t, nil, "--workspace", t.TempDir(), "--data", t.TempDir(), "--token-file", tokenFile)
		for _, tt := range []struct {
			auth string
			want int
		}{{"", http.StatusUnauthorized}, {"Bearer wrong", http.StatusUnauthorized}, {"Bearer file-token-1234", http.StatusOK}} {
			req, _ := http.NewRequest(http.MethodGet, s.base+"/v1/tools", nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("Authorization %q: %d, want %d", tt.auth, resp.StatusCode, tt.want)
			}
		}
	})

	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantPG  string
		wantErr string
	}{
		{name: "postgres file", args: []string{"--postgres-file", pgFile}, wantPG: "postgres://td:pw@127.0.0.1:9/td"},
		{name: "postgres from the environment", env: map[string]string{"TOOLDISPATCH_PG_URL": "postgres://env"}, wantPG: "postgres://env"},
		{name: "flag over the environment", env: map[string]string{"TOOLDISPATCH_PG_URL": "postgres://env"},
			args: []string{"--postgres-file", pgFile}, wantPG: "postgres://td:pw@127.0.0.1:9/td"},
		{name: "token twice", args: []string{"--token", "x", "--token-file", tokenFile}, wantErr: "--token or --token-file"},
		{name: "postgres twice", args: []string{"--postgres", "x", "--postgres-file", pgFile}, wantErr: "--postgres or --postgres-file"},
		{name: "missing file", args: []string{"--token-file", filepath.Join(dir, "nope")}, wantErr: filepath.Join(dir, "nope")},
		{name: "empty file", args: []string{"--postgres-file", empty}, wantErr: empty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("TOOLDISPATCH_PG_URL", "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			e, _, stderr := testEnv(strings.NewReader(""))
			o, err := e.parseFlags("serve", append([]string{"--workspace", t.TempDir(), "--data", t.TempDir()}, tt.args...))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(stderr.String(), tt.wantErr) {
					t.Fatalf("got %v, stderr %q; want a usage error naming %q", err, stderr.String(), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v: %s", err, stderr.String())
			}
			if o.postgres != tt.wantPG {
				t.Fatalf("postgres = %q, want %q", o.postgres, tt.wantPG)
			}
		})
	}
}

// TestScrubArgs: every spelling of a secret flag's value is overwritten,
// its length kept; other arguments and those after "--" are left alone.
func TestScrubArgs(t *testing.T) {
	tests := []struct{ in, want []string }{
		{in: []string{"td", "serve", "--token", "abc", "--addr", "x"}, want: []string{"td", "serve", "--token", "***", "--addr", "x"}},
		{in: []string{"td", "serve", "--token=abc"}, want: []string{"td", "serve", "--token=***"}},
		{in: []string{"td", "serve", "-postgres", "postgres://u:pw@h/db"}, want: []string{"td", "serve", "-postgres", "********************"}},
		{in: []string{"td", "serve", "-token=a=b"}, want: []string{"td", "serve", "-token=***"}},
		{in: []string{"td", "serve", "--token-file", "f"}, want: []string{"td", "serve", "--token-file", "f"}},
		{in: []string{"td", "run", "--", "--token", "abc"}, want: []string{"td", "run", "--", "--token", "abc"}},
		{in: []string{"td", "serve", "--token"}, want: []string{"td", "serve", "--token"}},
	}
	for _, tt := range tests {
		area := []byte(strings.Join(tt.in, "\x00") + "\x00")
		scrubArgs(area)
		if got := strings.Split(strings.TrimSuffix(string(area), "\x00"), "\x00"); strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%q: got %q, want %q", tt.in, got, tt.want)
		}
	}
	env := []byte("HOME=/root\x00TOOLDISPATCH_TOKEN=abc\x00PGPASSWORD=\x00TOOLDISPATCH_TOKEN_X=keep\x00")
	scrubEnv(env)
	if want := "HOME=/root\x00TOOLDISPATCH_TOKEN=***\x00PGPASSWORD=\x00TOOLDISPATCH_TOKEN_X=keep\x00"; string(env) != want {
		t.Errorf("scrubEnv: %q, want %q", env, want)
	}
}
