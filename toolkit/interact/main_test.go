package interact

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// protoactor's dead-letter throttle goroutine outlives its actor
		// system (it waits on a ticker it never stops); the dispatcher
		// tests run one.
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		// regexp2's match-timeout clock stops itself ~1 s after the last match.
		goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock"),
	)
}

// env is a workspace in a temp dir with the interaction tools, a directory
// next to it holding secret.txt, and in-memory file versions.
type env struct {
	dir      string // the workspace, symlinks resolved
	outside  string
	ws       *builtin.Workspace
	versions *builtin.MemoryVersions
	reg      *toolkit.Registry
}

func newEnv(t *testing.T) *env {
	t.Helper()
	base := t.TempDir()
	dir, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{dir, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret {{.x}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := builtin.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	e := &env{dir: ws.Dir(), outside: outside, ws: ws, versions: builtin.NewMemoryVersions(), reg: toolkit.NewRegistry()}
	Register(e.reg, Deps{Workspace: ws, Versions: e.versions})
	return e
}

func (e *env) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(e.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (e *env) read(t *testing.T, rel string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, filepath.FromSlash(rel)))
	if os.IsNotExist(err) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// call validates args against the tool's schema, as the dispatcher does,
// then runs the tool.
func (e *env) call(t *testing.T, name, args string) (string, error) {
	t.Helper()
	return callTool(t, e.reg, context.Background(), name, args, nil)
}

func callTool(t *testing.T, reg *toolkit.Registry, ctx context.Context, name, args string, ask toolkit.Asker) (string, error) {
	t.Helper()
	tool, ok := reg.Lookup(name)
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	a := mustArgs(t, args)
	sch, err := reg.Schemas.Compile(tool.Schema)
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(a.Value); err != nil {
		return "", err
	}
	if ask == nil {
		ask = func(context.Context, toolkit.Question) (toolkit.Answer, error) {
			return toolkit.Answer{}, toolkit.ErrNobodyToAsk
		}
	}
	res, err := tool.Handler(ctx, &toolkit.Call{Session: "s1", Run: "r1", ID: "c1", Name: name, Args: a, Emit: func(string) {}, Ask: ask})
	return res.Content, err
}

func mustArgs(t *testing.T, s string) toolkit.Args {
	t.Helper()
	a, err := toolkit.ParseArgs(s, toolkit.DefaultLimits)
	if err != nil {
		t.Fatalf("bad test arguments %s: %v", s, err)
	}
	return a
}
