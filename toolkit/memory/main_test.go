package memory

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/toolkit"
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

// openBadger opens a real Badger store in a temp dir, closed at cleanup.
func openBadger(t *testing.T) *badger.Store {
	t.Helper()
	return openBadgerAt(t, t.TempDir())
}

func openBadgerAt(t testing.TB, dir string) *badger.Store {
	t.Helper()
	s, err := badger.Open(badger.TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// run calls the memory's tool name with JSON arguments in session s1, the
// way the dispatcher does after validating them against the tool's schema.
func run(t *testing.T, m *Memory, name, args string) (string, error) {
	t.Helper()
	return runIn(t, m, "s1", name, args)
}

func runIn(t *testing.T, m *Memory, session, name, args string) (string, error) {
	t.Helper()
	reg := toolkit.NewRegistry()
	m.Register(reg)
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
	res, err := tool.Handler(context.Background(), &toolkit.Call{Session: session, Run: "r1", ID: "c1", Name: name, Args: a, Emit: func(string) {}})
	return res.Content, err
}

func mustRun(t *testing.T, m *Memory, name, args string) string {
	t.Helper()
	out, err := run(t, m, name, args)
	if err != nil {
		t.Fatalf("%s %s: %v", name, args, err)
	}
	return out
}

// mustArgs parses JSON arguments strictly, the way the dispatcher hands them
// to handlers.
func mustArgs(t testing.TB, s string) toolkit.Args {
	t.Helper()
	a, err := toolkit.ParseArgs(s, toolkit.DefaultLimits)
	if err != nil {
		t.Fatalf("bad test arguments %s: %v", s, err)
	}
	return a
}
