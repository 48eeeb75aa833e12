package builtin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunCommandShellInArgvRefused: with shell mode off, argv that makes a
// shell read a command line (its -c, -s or standard input), however it is
// dressed up (a path, a symlink, a hard link, option clusters, a launcher
// such as env, nice or find -exec, busybox), is refused before anything
// runs. Each command would create the file "ran" in the workspace.
func TestRunCommandShellInArgvRefused(t *testing.T) {
	e := newTestEnv(t)
	touch := "touch ran"
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	realSh, err := filepath.EvalSymlinks(sh)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sh, e.path("tool")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/stdin", e.path("input")); err != nil {
		t.Fatal(err)
	}
	loaders, _ := filepath.Glob("/lib*/ld-linux*.so*")
	loader := "/lib64/ld-linux-x86-64.so.2"
	if len(loaders) > 0 {
		loader = loaders[0]
	}
	// A hard link needs the same file system; /proc/self/exe's shell is
	// usually on another, so the case runs where it can.
	hardLinked := os.Link(realSh, e.path("renamed")) == nil

	tests := []struct {
		name  string
		argv  []string
		stdin string
		skip  bool
	}{
		{name: "sh -c", argv: []string{"sh", "-c", touch}},
		{name: "absolute path", argv: []string{"/bin/sh", "-c", touch}},
		{name: "dotted path", argv: []string{"/usr/bin/../bin/sh", "-c", touch}},
		{name: "resolved path", argv: []string{realSh, "-c", touch}},
		{name: "symlink in the workspace", argv: []string{"./tool", "-c", touch}},
		{name: "hard link under another name", argv: []string{"./renamed", "-c", touch}, skip: !hardLinked},
		{name: "bash -c", argv: []string{"bash", "-c", touch}},
		{name: "dash -c", argv: []string{"dash", "-c", touch}},
		{name: "zsh -c", argv: []string{"zsh", "-c", touch}},
		{name: "option cluster", argv: []string{"bash", "-ec", touch}},
		{name: "options before -c", argv: []string{"bash", "--norc", "-o", "pipefail", "-O", "extglob", "-xc", touch}},
		{name: "plus options", argv: []string{"sh", "+x", "-c", touch}},
		{name: "script on stdin", argv: []string{"sh"}, stdin: touch},
		{name: "sh -s", argv: []string{"sh", "-s"}, stdin: touch},
		{name: "sh -", argv: []string{"sh", "-"}, stdin: touch},
		{name: "sh /dev/stdin", argv: []string{"sh", "/dev/stdin"}, stdin: touch},
		{name: "symlink to stdin", argv: []string{"sh", "input"}, stdin: touch},
		{name: "busybox sh", argv: []string{"busybox", "sh", "-c", touch}},
		{name: "env", argv: []string{"env", "sh", "-c", touch}},
		{name: "env with options and variables", argv: []string{"/usr/bin/env", "-i", "-u", "HOME", "PATH=/usr/bin:/bin", "A=1", "sh", "-c", touch}},
		{name: "env -S", argv: []string{"env", "-S", "sh -c 'touch ran'"}},
		{name: "env --split-string", argv: []string{"env", "--split-string=sh -c 'touch ran'"}},
		{name: "nested launchers", argv: []string{"nice", "-n", "5", "timeout", "-s", "KILL", "10", "stdbuf", "-o", "L", "env", "sh", "-c", touch}},
		{name: "nohup", argv: []string{"nohup", "sh", "-c", touch}},
		{name: "setsid", argv: []string{"setsid", "-w", "sh", "-c", touch}},
		{name: "xargs", argv: []string{"xargs", "-0", "sh", "-c"}, stdin: touch},
		{name: "find -exec", argv: []string{"find", ".", "-maxdepth", "0", "-exec", "sh", "-c", touch, ";"}},
		{name: "script", argv: []string{"script", "-qc", touch, "/dev/null"}},
		{name: "flock -c", argv: []string{"flock", "lock", "-c", touch}},
		{name: "su", argv: []string{"su", "-c", touch}},
		{name: "unshare without a command", argv: []string{"unshare", "-r"}, stdin: touch},
		{name: "chroot without a command", argv: []string{"chroot", "/"}, stdin: touch},
		{name: "sudo -s", argv: []string{"sudo", "-s"}, stdin: touch},
		{name: "env -S with options", argv: []string{"env", "-S", "-i A=1 sh -c 'touch ran'"}},
		{name: "env option cluster with -S", argv: []string{"env", "-iS", "sh -c 'touch ran'"}},
		{name: "dynamic loader", argv: []string{loader, "--argv0", "x", "/bin/sh", "-c", touch}},
		{name: "fish -C", argv: []string{"fish", "-C", touch}},
		{name: "pwsh -Command", argv: []string{"pwsh", "-NoProfile", "-Command", touch}},
		{name: "pwsh -e", argv: []string{"pwsh", "-e", "dABvAHUAYwBoACAAcgBhAG4A"}},
		{name: "tmux", argv: []string{"tmux", "new-session", "-d", touch}},
		{name: "prlimit", argv: []string{"prlimit", "--nofile=64", "--cpu=10", "sh", "-c", touch}},
		{name: "setarch", argv: []string{"setarch", "x86_64", "-R", "sh", "-c", touch}},
		{name: "setarch by an architecture's name", argv: []string{"linux64", "--addr-no-randomize", "sh", "-c", touch}},
		{name: "setarch without a command", argv: []string{"linux64"}, stdin: touch},
		{name: "logsave", argv: []string{"logsave", "-a", "log.txt", "sh", "-c", touch}},
		{name: "ssh-agent", argv: []string{"ssh-agent", "-a", "agent.sock", "sh", "-c", touch}},
		{name: "choom", argv: []string{"choom", "-n", "10", "--", "sh", "-c", touch}},
		{name: "uclampset", argv: []string{"uclampset", "-m", "0", "sh", "-c", touch}},
		{name: "scriptlive", argv: []string{"scriptlive", "-c", touch, "timing", "typescript"}},
		{name: "perf stat", argv: []string{"perf", "stat", "-x,", "-e", "task-clock", "sh", "-c", touch}},
		{name: "perf record --", argv: []string{"perf", "record", "-q", "-o", "perf.data", "--", "sh", "-c", touch}},
		{name: "start-stop-daemon", argv: []string{"start-stop-daemon", "--start", "--oknodo", "--exec", "/bin/sh", "--", "-c", "touch " + e.path("ran")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.skip {
				t.Skip("the shell lies on another file system than the workspace: no hard link")
			}
			args := map[string]any{"argv": tt.argv}
			if tt.stdin != "" {
				args["stdin"] = tt.stdin
			}
			_, err := e.call("run_command", jsonArgs(t, args))
			if _, ran := e.read("ran"); ran {
				os.Remove(e.path("ran"))
				t.Fatalf("the command ran (error %v)", err)
			}
			wantErr(t, err, "shell mode is disabled")
		})
	}
}

// TestRunCommandShellInArgvNotOverRefused: programs that only look like a
// shell invocation, shell scripts in files and launchers of other programs
// still run with shell mode off; and with shell mode on, sh -c in argv runs.
func TestRunCommandShellInArgvNotOverRefused(t *testing.T) {
	e := newTestEnv(t)
	e.write("script.sh", "echo from-script\n")
	tests := []struct {
		name string
		argv []string
		want string
	}{
		{name: "sh with a script file", argv: []string{"sh", "script.sh"}, want: "from-script"},
		{name: "bash -e with a script file", argv: []string{"bash", "-e", "--", "script.sh"}, want: "from-script"},
		{name: "echo of a shell command", argv: []string{"echo", "sh", "-c", "x"}, want: "sh -c x"},
		{name: "grep -c", argv: []string{"grep", "-c", "from", "script.sh"}, want: "1"},
		{name: "env of another program", argv: []string{"env", "-i", "A=1", "echo", "hi"}, want: "hi"},
		{name: "timeout of another program", argv: []string{"timeout", "5", "echo", "hi"}, want: "hi"},
		{name: "find -exec of another program", argv: []string{"find", "script.sh", "-exec", "cat", "{}", ";"}, want: "from-script"},
		{name: "prlimit of another program", argv: []string{"prlimit", "--nofile=64", "echo", "hi"}, want: "hi"},
		{name: "setarch of another program", argv: []string{"setarch", "x86_64", "-R", "echo", "hi"}, want: "hi"},
		{name: "linux64 of another program", argv: []string{"linux64", "echo", "hi"}, want: "hi"},
		{name: "perf stat of another program", argv: []string{"perf", "stat", "-x,", "-e", "task-clock", "echo", "hi"}, want: "hi"},
		{name: "logsave of another program", argv: []string{"logsave", "log.txt", "echo", "hi"}, want: "hi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.call("run_command", jsonArgs(t, map[string]any{"argv": tt.argv}))
			wantContent(t, out, err, "exit code 0", tt.want)
		})
	}
	t.Run("shell mode on", func(t *testing.T) {
		on := newTestEnv(t, func(d *Deps) { d.Shell = true })
		out, err := on.call("run_command", `{"argv":["sh","-c","echo on | tr a-z A-Z"]}`)
		wantContent(t, out, err, "exit code 0", "ON")
		if strings.Contains(out, "disabled") {
			t.Fatal(out)
		}
	})
}

// FuzzHiddenShell: any argv gets an answer (no panic, no endless loop),
// and sh given -c first is always recognised.
func FuzzHiddenShell(f *testing.F) {
	for _, seed := range [][]string{
		{"sh", "-c", "x"}, {"env", "-S", "sh -c 'x'"}, {"env", "-S", "env -S 'env -S \"sh -c x\"'"},
		{"find", ".", "-exec", "sh", "-c", "x", ";"}, {"nice", "-n"}, {"timeout"}, {"env", "-u"}, {"pwsh", "-"},
		{"bash", "-o"}, {"busybox"}, {"xargs", "-I"}, {"env", "-S", "'unclosed"},
	} {
		f.Add(strings.Join(seed, "\x00"))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, joined string) {
		argv := strings.Split(joined, "\x00")
		_ = hiddenShell(argv, dir)
		if got := hiddenShell(append([]string{"sh", "-c"}, argv...), dir); got == "" {
			t.Fatalf("sh -c %q not recognised", argv)
		}
	})
}
