package builtin

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/internal/procgroup"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// regexp2's match-timeout clock stops itself ~1 s after the last match.
		goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock"))
}

// testEnv is a workspace in a temp dir with every built-in tool, plus a
// directory outside the workspace holding secret.txt.
type testEnv struct {
	t        *testing.T
	dir      string // the workspace
	outside  string // a directory next to it
	ws       *Workspace
	versions *MemoryVersions
	tools    map[string]toolkit.Tool
}

func newTestEnv(t *testing.T, configure ...func(*Deps)) *testEnv {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{dir, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(outside, "secret.txt"), "secret\n")
	ws, err := OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	versions := NewMemoryVersions()
	deps := Deps{Workspace: ws, Versions: versions}
	for _, c := range configure {
		c(&deps)
	}
	e := &testEnv{t: t, dir: ws.Dir(), outside: outside, ws: ws, versions: versions, tools: map[string]toolkit.Tool{}}
	for _, tool := range Tools(deps) {
		e.tools[tool.Name] = tool
	}
	return e
}

// call runs tool name with JSON arguments and returns its content or error.
func (e *testEnv) call(name, args string) (string, error) {
	e.t.Helper()
	return e.callCtx(context.Background(), name, args, func(string) {})
}

func (e *testEnv) callCtx(ctx context.Context, name, args string, emit func(string)) (string, error) {
	e.t.Helper()
	tool, ok := e.tools[name]
	if !ok {
		e.t.Fatalf("no tool %s", name)
	}
	res, err := tool.Handler(ctx, &toolkit.Call{ID: "c1", Name: name, Args: mustArgs(e.t, args), Emit: emit})
	return res.Content, err
}

// path returns the absolute path of a workspace-relative name.
func (e *testEnv) path(rel string) string { return filepath.Join(e.dir, filepath.FromSlash(rel)) }

func (e *testEnv) write(rel, content string) {
	e.t.Helper()
	p := e.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	writeFile(e.t, p, content)
}

func (e *testEnv) read(rel string) (string, bool) {
	e.t.Helper()
	b, err := os.ReadFile(e.path(rel))
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b), true
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mustArgs parses JSON arguments strictly, the way the dispatcher hands them
// to handlers (canonical bytes, numbers as json.Number).
func mustArgs(t *testing.T, s string) toolkit.Args {
	t.Helper()
	a, err := toolkit.ParseArgs(s, toolkit.DefaultLimits)
	if err != nil {
		t.Fatalf("bad test arguments %s: %v", s, err)
	}
	return a
}

// wantErr fails unless err is non-nil and its text holds every part.
func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error containing %q, got none", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

// wantContent fails on err or unless content holds every part.
func wantContent(t *testing.T, content string, err error, parts ...string) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	for _, p := range parts {
		if !strings.Contains(content, p) {
			t.Fatalf("content does not contain %q:\n%s", p, content)
		}
	}
}

// shellOn turns run_command's shell mode on.
func shellOn(d *Deps) { d.Shell = true }

// runningWithArgs returns the processes that run (not zombies) with
// exactly argv as their command line.
func runningWithArgs(argv ...string) []int {
	want := strings.Join(argv, "\x00") + "\x00"
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == want && procgroup.Running(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processGone reports whether pid no longer runs (gone, or a zombie waiting
// for its parent to reap it).
func processGone(t *testing.T, pid int) bool {
	t.Helper()
	return !procgroup.Running(pid)
}

// emitted collects streamed output; safe for concurrent use.
type emitted struct {
	mu     sync.Mutex
	pieces []string
}

func (e *emitted) emit(s string) {
	e.mu.Lock()
	e.pieces = append(e.pieces, s)
	e.mu.Unlock()
}

func (e *emitted) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.pieces...)
}

func readPID(t *testing.T, p string) int {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("reading pid file: %v", err)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil {
		t.Fatalf("pid file %q: %v", b, err)
	}
	return pid
}
