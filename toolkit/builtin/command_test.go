package builtin

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRunCommand(t *testing.T) {
	tests := []struct {
		name    string
		deps    func(*Deps)
		setup   func(e *testEnv)
		args    string
		want    []string // parts of the content
		notWant []string
		err     []string // parts of the error; nil means success
	}{
		{name: "output and exit code", args: `{"argv":["echo","hello","world"]}`, want: []string{"exit code 0", "hello world\n"}},
		{name: "stderr is captured", deps: shellOn, args: `{"argv":["sh","-c","echo out; echo err >&2"]}`, want: []string{"out\n", "err\n"}},
		{name: "no output", args: `{"argv":["true"]}`, want: []string{"exit code 0", "(no output)"}},
		{name: "non-zero exit", deps: shellOn, args: `{"argv":["sh","-c","echo oops; echo more >&2; exit 3"]}`,
			err: []string{"exit code 3", "oops\n", "more\n"}},
		{name: "killed by a signal", deps: shellOn, args: `{"argv":["sh","-c","kill -9 $$"]}`, err: []string{"killed by signal killed"}},
		{name: "stdin", args: `{"argv":["cat"],"stdin":"fed through stdin"}`, want: []string{"fed through stdin"}},
		{name: "empty stdin by default", args: `{"argv":["cat"]}`, want: []string{"(no output)"}},
		{name: "runs in the workspace", setup: func(e *testEnv) { e.write("marker.txt", "m") },
			args: `{"argv":["ls"]}`, want: []string{"marker.txt"}},
		{name: "cwd", setup: func(e *testEnv) { e.write("sub/inner.txt", "i") },
			args: `{"argv":["ls"],"cwd":"sub"}`, want: []string{"inner.txt"}, notWant: []string{"sub\n"}},
		{name: "cwd that is a file", setup: func(e *testEnv) { e.write("f", "") },
			args: `{"argv":["ls"],"cwd":"f"}`, err: []string{"f is not a directory"}},
		{name: "missing cwd", args: `{"argv":["ls"],"cwd":"nope"}`, err: []string{"nope does not exist"}},
		{name: "unknown program", args: `{"argv":["no-such-program-tooldispatch"]}`, err: []string{"starting no-such-program-tooldispatch"}},
		{name: "empty argv", args: `{"argv":[]}`, err: []string{"argv is empty"}},
		{name: "no command", args: `{}`, err: []string{"argv is empty"}},
		{name: "shell refused by default", args: `{"shell":"echo hi"}`, err: []string{"shell mode is disabled", "argv"}},
		{name: "shell when enabled", deps: func(d *Deps) { d.Shell = true },
			args: `{"shell":"echo hi | tr a-z A-Z && echo done"}`, want: []string{"HI\ndone\n"}},
		{name: "argv and shell", deps: func(d *Deps) { d.Shell = true },
			args: `{"argv":["echo"],"shell":"echo"}`, err: []string{"not both"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var deps []func(*Deps)
			if tt.deps != nil {
				deps = append(deps, tt.deps)
			}
			e := newTestEnv(t, deps...)
			if tt.setup != nil {
				tt.setup(e)
			}
			out, err := e.call("run_command", tt.args)
			if tt.err != nil {
				wantErr(t, err, tt.err...)
				return
			}
			wantContent(t, out, err, tt.want...)
			for _, n := range tt.notWant {
				if strings.Contains(out, n) {
					t.Fatalf("content contains %q:\n%s", n, out)
				}
			}
		})
	}
}

func TestRunCommandEnvironmentIsMinimal(t *testing.T) {
	t.Setenv("TOOLDISPATCH_TEST_SECRET", "s3cr3t-value")
	e := newTestEnv(t)
	out, err := e.call("run_command", `{"argv":["env"]}`)
	wantContent(t, out, err, "PATH=", "HOME=", "LANG=")
	if strings.Contains(out, "s3cr3t-value") || strings.Contains(out, "TOOLDISPATCH_TEST_SECRET") {
		t.Fatalf("the parent's environment leaked:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if k, _, ok := strings.Cut(line, "="); ok && !strings.Contains(k, " ") {
			switch k {
			case "PATH", "HOME", "LANG", "PWD", "SHLVL", "_":
			default:
				t.Errorf("unexpected variable %s in the command's environment", k)
			}
		}
	}
}

// TestRunCommandTimeoutKillsGroup: a timed-out command's background child
// (another member of its process group) is gone when the call returns.
func TestRunCommandTimeoutKillsGroup(t *testing.T) {
	e := newTestEnv(t, shellOn)
	_, err := e.call("run_command", `{"argv":["sh","-c","sleep 100 & echo $! > pid; echo started; wait"],"timeout_ms":1000}`)
	wantErr(t, err, "timed out", "process group was killed", "started")
	if pid := readPID(t, e.path("pid")); !processGone(t, pid) {
		t.Fatalf("background process %d survived the timeout", pid)
	}
}

// TestRunCommandCancelKillsGroup cancels the call once the command reports
// it is running; the grandchild, which ignores SIGTERM, must be killed too.
func TestRunCommandCancelKillsGroup(t *testing.T) {
	e := newTestEnv(t, shellOn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got emitted
	emit := func(s string) {
		got.emit(s)
		if s == "ready\n" {
			cancel()
		}
	}
	script := `(trap "" TERM; while :; do sleep 1; done) & echo $! > pid; sleep 100 & echo $! > pid2; echo ready; wait`
	_, err := e.callCtx(ctx, "run_command", jsonArgs(t, map[string]any{"argv": []string{"sh", "-c", script}}), emit)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	wantErr(t, err, "process group killed", "ready")
	for _, f := range []string{"pid", "pid2"} {
		if pid := readPID(t, e.path(f)); !processGone(t, pid) {
			t.Fatalf("process %d (%s) survived the cancel", pid, f)
		}
	}
	if diff := cmp.Diff([]string{"ready\n"}, got.all()); diff != "" {
		t.Fatalf("streamed (-want +got):\n%s", diff)
	}
}

// TestRunCommandEndsLeftovers: a background process still running when the
// command exits normally does not outlive the call.
func TestRunCommandEndsLeftovers(t *testing.T) {
	e := newTestEnv(t, shellOn)
	out, err := e.call("run_command", `{"argv":["sh","-c","sleep 100 >/dev/null 2>&1 & echo $! > pid; echo main done"]}`)
	wantContent(t, out, err, "exit code 0", "main done")
	if pid := readPID(t, e.path("pid")); !processGone(t, pid) {
		t.Fatalf("background process %d outlived the command", pid)
	}
}

func TestRunCommandHonoursDoneContext(t *testing.T) {
	e := newTestEnv(t, shellOn)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.callCtx(ctx, "run_command", `{"argv":["sh","-c","echo ran > ran.txt"]}`, func(string) {})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, ok := e.read("ran.txt"); ok {
		t.Fatal("the command ran although the context was done")
	}
}

func TestRunCommandOutputCap(t *testing.T) {
	e := newTestEnv(t, func(d *Deps) { d.OutputCap = 1024 })
	var got emitted
	out, err := e.callCtx(context.Background(), "run_command", `{"argv":["seq","1","20000"]}`, got.emit)
	wantContent(t, out, err, "exit code 0", "1\n2\n3\n", "19999\n20000\n", "of output cut (106.3 KiB in all); head and tail kept")
	if len(out) > 1024+200 {
		t.Fatalf("content is %d bytes, more than the cap allows", len(out))
	}
	pieces := got.all()
	last := pieces[len(pieces)-1]
	if !strings.HasPrefix(last, "[streaming stopped after") {
		t.Fatalf("last streamed piece = %q, want the streaming-stopped notice", last)
	}
	if len(pieces) > 4*1024/2 {
		t.Fatalf("%d pieces streamed; streaming is not capped", len(pieces))
	}
}

func TestRunCommandStreamsLinesInOrder(t *testing.T) {
	e := newTestEnv(t, shellOn)
	var got emitted
	out, err := e.callCtx(context.Background(), "run_command",
		`{"argv":["sh","-c","for i in 1 2 3 4 5; do echo line$i; done; printf tail"]}`, got.emit)
	wantContent(t, out, err, "line1\nline2\nline3\nline4\nline5\ntail")
	want := []string{"line1\n", "line2\n", "line3\n", "line4\n", "line5\n", "tail"}
	if diff := cmp.Diff(want, got.all()); diff != "" {
		t.Fatalf("streamed (-want +got):\n%s", diff)
	}
}

func TestCapture(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		writes []string
		want   string
	}{
		{name: "under the limit", limit: 10, writes: []string{"abc", "def\n"}, want: "abcdef\n"},
		{name: "exactly the limit", limit: 6, writes: []string{"abc", "de\n"}, want: "abcde\n"},
		{name: "head and tail kept", limit: 6, writes: []string{"abcdefghij", "klmno\n"},
			want: "abc\n[… 10 B of output cut (16 B in all); head and tail kept …]\nno\n"},
		{name: "many small writes", limit: 4, writes: strings.Split("0123456789", ""),
			want: "01\n[… 6 B of output cut (10 B in all); head and tail kept …]\n89\n"},
		{name: "nothing", limit: 4, want: "(no output)\n"},
		{name: "cuts outside redaction markers", limit: 20, writes: []string{"abcdefgh[secret:K]", strings.Repeat("m", 30), "[secret:K]xy\n"},
			want: "abcdefgh\n[… 50 B of output cut (61 B in all); head and tail kept …]\nxy\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCapture(tt.limit)
			for _, w := range tt.writes {
				c.Write([]byte(w))
			}
			if diff := cmp.Diff(tt.want, c.String()); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}
