package mcp

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// forbidden are server-everything tools the tests never call: get-env
// returns the whole environment, gzip-file-as-resource fetches from the
// internet.
var forbidden = []string{"get-env", "gzip-file-as-resource"}

func TestEverythingStdio(t *testing.T) {
	h := newHarness(t, []ServerConfig{
		{Name: "everything", Command: serverCommand(t, "server-everything", "stdio"), Trusted: true},
		{Name: "everything untrusted", Command: serverCommand(t, "server-everything", "stdio"), Timeout: 400 * time.Millisecond},
	})
	began := time.Now()
	h.start()
	t.Logf("two stdio servers started in %s", time.Since(began).Round(time.Millisecond))

	t.Run("tools registered with their draft-07 schemas", func(t *testing.T) {
		for _, name := range []string{"mcp__everything__echo", "mcp__everything__get-sum", "mcp__everything_untrusted__echo"} {
			tool := h.tool(name)
			if tool.Source != toolkit.SourceMCP || tool.Concurrent {
				t.Errorf("%s: source %s, concurrent %v; want mcp, false", name, tool.Source, tool.Concurrent)
			}
			if !strings.Contains(string(tool.Schema), "http://json-schema.org/draft-07/schema#") {
				t.Errorf("%s: schema does not declare draft-07: %s", name, tool.Schema)
			}
		}
		for _, tool := range h.reg.All() {
			if _, err := h.reg.Schemas.Compile(tool.Schema); err != nil {
				t.Errorf("%s: schema does not compile: %v", tool.Name, err)
			}
		}
		// The compiled draft-07 schema is enforced.
		sch, err := h.reg.Schemas.Compile(h.tool("mcp__everything__get-sum").Schema)
		if err != nil {
			t.Fatal(err)
		}
		bad, _ := toolkit.ParseArgs(`{"a":"two","b":3}`, toolkit.Limits{})
		if err := sch.Validate(bad.Value); err == nil || !strings.Contains(err.Error(), `field "a": want number, got string`) {
			t.Errorf("validating get-sum {a:\"two\"}: got %v", err)
		}
	})

	t.Run("echo", func(t *testing.T) {
		got, err := h.call(context.Background(), "mcp__everything__echo", `{"message":"hello, world"}`)
		if err != nil || got != "Echo: hello, world" {
			t.Errorf("echo = %q, %v; want %q", got, err, "Echo: hello, world")
		}
	})

	t.Run("add", func(t *testing.T) {
		got, err := h.call(context.Background(), "mcp__everything__get-sum", `{"a":2,"b":3.5}`)
		if err != nil || got != "The sum of 2 and 3.5 is 5.5." {
			t.Errorf("get-sum = %q, %v", got, err)
		}
	})

	t.Run("isError result becomes an error", func(t *testing.T) {
		tool := h.tool("mcp__everything__get-sum")
		a, _ := toolkit.ParseArgs(`{"a":"two"}`, toolkit.Limits{})
		_, err := h.run(context.Background(), tool, a)
		var te *ToolError
		if !errors.As(err, &te) || te.Tool != "get-sum" || !strings.Contains(te.Text, "expected number, received string at a") {
			t.Errorf("get-sum with a bad argument: %v (%T); want a *ToolError naming the argument", err, err)
		}
	})

	t.Run("readOnlyHint counts only for a trusted server", func(t *testing.T) {
		cases := []struct {
			name string
			want bool
		}{
			{"mcp__everything__echo", true},
			{"mcp__everything__get-sum", true},
			{"mcp__everything__toggle-simulated-logging", false},
			{"mcp__everything_untrusted__echo", false},
			{"mcp__everything_untrusted__get-sum", false},
		}
		for _, c := range cases {
			tool := h.tool(c.name)
			if got := tool.IsReadOnly(toolkit.Args{}); got != c.want {
				t.Errorf("%s read-only = %v, want %v", c.name, got, c.want)
			}
		}
	})

	t.Run("list_changed refreshes the registry", func(t *testing.T) {
		// server-everything registers simulate-research-query after the
		// initialize handshake and announces it with list_changed.
		for _, name := range []string{"mcp__everything__simulate-research-query", "mcp__everything_untrusted__simulate-research-query"} {
			waitUntil(t, name, h.ev.synced, func() bool { _, ok := h.reg.Lookup(name); return ok })
		}
		s := h.m.servers[0]
		sess, err := s.current()
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for tool, err := range sess.Tools(context.Background(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, "mcp__everything__"+tool.Name)
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, h.names("mcp__everything__")); diff != "" {
			t.Errorf("registry differs from the server's tools/list (-want +got):\n%s", diff)
		}
	})

	t.Run("timeout cancels the call and the server still answers", func(t *testing.T) {
		// The untrusted server's tool timeout is 400 ms.
		began := time.Now()
		_, err := h.call(context.Background(), "mcp__everything_untrusted__trigger-long-running-operation", `{"duration":30,"steps":30}`)
		elapsed := time.Since(began)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("long-running call: %v; want a deadline error", err)
		}
		if elapsed > 3*time.Second {
			t.Errorf("the timed-out call returned after %s", elapsed)
		}
		t.Logf("timeout error after %s: %v", elapsed.Round(time.Millisecond), err)
		got, err := h.call(context.Background(), "mcp__everything_untrusted__echo", `{"message":"still here"}`)
		if err != nil || got != "Echo: still here" {
			t.Errorf("echo after the timeout = %q, %v", got, err)
		}
	})

	t.Run("cancelled call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		drain(h.ev.call)
		go func() {
			select {
			case <-h.ev.call:
			case <-time.After(waitLimit):
			}
			cancel()
		}()
		_, err := h.call(ctx, "mcp__everything__trigger-long-running-operation", `{"duration":30,"steps":30}`)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call: %v; want context.Canceled", err)
		}
		got, err := h.call(context.Background(), "mcp__everything__echo", `{"message":"after cancel"}`)
		if err != nil || got != "Echo: after cancel" {
			t.Errorf("echo after the cancel = %q, %v", got, err)
		}
	})

	t.Run("status", func(t *testing.T) {
		for _, st := range h.m.Servers() {
			if st.State != StateUp || st.Tools < 10 || st.Restarts != 0 {
				t.Errorf("status %+v; want up with its tools and no restart", st)
			}
		}
	})

	for _, name := range forbidden {
		for _, prefix := range []string{"mcp__everything__", "mcp__everything_untrusted__"} {
			if _, ok := h.reg.Lookup(prefix + name); !ok {
				t.Errorf("%s%s is not registered (the server lists it; it is only never called)", prefix, name)
			}
		}
	}
}

// drain empties a channel of events from earlier steps.
func drain[T any](ch chan T) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func TestFilesystemServer(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "notes.txt")
	if err := os.WriteFile(file, []byte("first line\nsecond line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, []ServerConfig{{Name: "files", Command: serverCommand(t, "server-filesystem", root), Trusted: true}})
	h.start()

	// read_text_file declares an outputSchema ({"content": string}): the
	// checked structured content is the result, and the text block that
	// only repeats its content is left out.
	got, err := h.call(context.Background(), "mcp__files__read_text_file", `{"path":"`+file+`"}`)
	if err != nil || got != `{"content":"first line\nsecond line\n"}` {
		t.Errorf("read_text_file = %q, %v", got, err)
	}
	_, err = h.call(context.Background(), "mcp__files__read_text_file", `{"path":"`+outside+`"}`)
	var te *ToolError
	if !errors.As(err, &te) || !strings.Contains(te.Text, "denied") {
		t.Errorf("reading outside the root: %v; want the server's access-denied error", err)
	}
	if ro, rw := h.tool("mcp__files__read_text_file").ReadOnly, h.tool("mcp__files__write_file").ReadOnly; !ro || rw {
		t.Errorf("read_text_file read-only %v, write_file read-only %v; want true, false", ro, rw)
	}
}

func TestMemoryServer(t *testing.T) {
	memFile := filepath.Join(t.TempDir(), "memory.jsonl")
	h := newHarness(t, []ServerConfig{{
		Name: "memory", Command: serverCommand(t, "server-memory"), Env: map[string]string{"MEMORY_FILE_PATH": memFile},
	}})
	h.start()

	_, err := h.call(context.Background(), "mcp__memory__create_entities",
		`{"entities":[{"name":"Ada Lovelace","entityType":"person","observations":["wrote the first published program"]}]}`)
	if err != nil {
		t.Fatalf("create_entities: %v", err)
	}
	got, err := h.call(context.Background(), "mcp__memory__open_nodes", `{"names":["Ada Lovelace"]}`)
	if err != nil || !strings.Contains(got, "wrote the first published program") {
		t.Errorf("open_nodes = %q, %v", got, err)
	}
	data, err := os.ReadFile(memFile)
	if err != nil || !strings.Contains(string(data), "Ada Lovelace") {
		t.Errorf("memory file %s: %q, %v; want the entity stored there", memFile, data, err)
	}
}

func TestServerKilledMidCall(t *testing.T) {
	// Each restart waits for a token, so the test can look at the server
	// while it is down however slow the machine is.
	proceed := make(chan struct{}, 2)
	h := newHarness(t, []ServerConfig{{Name: "everything", Command: serverCommand(t, "server-everything", "stdio")}},
		func(m *Manager) {
			m.policy = backoff{initial: 400 * time.Millisecond, max: 4 * time.Second, healthy: time.Hour}
			observe := m.hooks.retry
			m.hooks.retry = func(s string, d time.Duration, err error) {
				observe(s, d, err)
				select {
				case <-proceed:
				case <-time.After(waitLimit):
				}
			}
		})
	h.start()
	first := next(t, "the first session", h.ev.up)

	type outcome struct {
		err     error
		elapsed time.Duration
	}
	kill := func(pid int) outcome {
		t.Helper()
		drain(h.ev.call)
		done := make(chan outcome, 1)
		go func() {
			_, err := h.call(context.Background(), "mcp__everything__trigger-long-running-operation", `{"duration":30,"steps":30}`)
			done <- outcome{err: err}
		}()
		next(t, "the long call", h.ev.call)
		killed := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		o := next(t, "the killed call's result", done)
		o.elapsed = time.Since(killed)
		return o
	}

	o := kill(first.pid)
	if !errors.Is(o.err, ErrServerFailed) {
		t.Fatalf("call during the kill: %v; want ErrServerFailed", o.err)
	}
	if o.elapsed > 2*time.Second {
		t.Errorf("the killed call returned %s after the kill", o.elapsed)
	}
	t.Logf("killed call answered %s after SIGKILL: %v", o.elapsed.Round(time.Millisecond), o.err)

	r := next(t, "the restart", h.ev.retry)
	if r.delay != 400*time.Millisecond {
		t.Errorf("first restart delay %s, want 400ms", r.delay)
	}
	// A call while the server is down waits for the restart up to its own
	// deadline; this one's ends first, so it was not sent.
	early, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := h.call(early, "mcp__everything__echo", `{"message":"too early"}`)
	cancel()
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, toolkit.ErrNotSent) || !strings.Contains(err.Error(), "not sent") || !strings.Contains(err.Error(), "restarting") {
		t.Errorf("call while the server is down: %v; want ErrUnavailable and ErrNotSent saying it is restarting and not sent", err)
	}
	proceed <- struct{}{}

	second := next(t, "the restarted session", h.ev.up)
	if second.pid == first.pid {
		t.Fatalf("the restarted server has the old pid %d", second.pid)
	}
	got, err := h.call(context.Background(), "mcp__everything__echo", `{"message":"back"}`)
	if err != nil || got != "Echo: back" {
		t.Errorf("echo after the restart = %q, %v", got, err)
	}

	// A second crash soon after doubles the wait.
	if o := kill(second.pid); !errors.Is(o.err, ErrServerFailed) {
		t.Fatalf("second kill: %v", o.err)
	}
	if r := next(t, "the second restart", h.ev.retry); r.delay != 800*time.Millisecond {
		t.Errorf("second restart delay %s, want 800ms", r.delay)
	}
	proceed <- struct{}{}
	third := next(t, "the third session", h.ev.up)
	got, err = h.call(context.Background(), "mcp__everything__echo", `{"message":"again"}`)
	if err != nil || got != "Echo: again" {
		t.Errorf("echo after the second restart = %q, %v", got, err)
	}
	st := h.m.Servers()[0]
	if st.State != StateUp || st.Restarts != 2 {
		t.Errorf("status %+v; want up after 2 restarts", st)
	}
	if processAlive(first.pid) || processAlive(second.pid) || !processAlive(third.pid) {
		t.Errorf("processes alive: first %v second %v third %v; want only the third",
			processAlive(first.pid), processAlive(second.pid), processAlive(third.pid))
	}
}

func TestHealthyPeriodResetsBackoff(t *testing.T) {
	h := newHarness(t, []ServerConfig{{Name: "everything", Command: serverCommand(t, "server-everything", "stdio")}},
		func(m *Manager) { m.policy = backoff{initial: 200 * time.Millisecond, max: time.Second, healthy: 0} })
	h.start()
	for i := range 2 {
		up := next(t, "a session", h.ev.up)
		if err := syscall.Kill(up.pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if r := next(t, "a restart", h.ev.retry); r.delay != 200*time.Millisecond {
			t.Errorf("restart %d after a healthy session: delay %s, want the initial 200ms", i+1, r.delay)
		}
	}
	next(t, "the last session", h.ev.up)
}

func TestServerThatCannotStart(t *testing.T) {
	h := newHarness(t, []ServerConfig{{Name: "broken", Command: []string{"sh", "-c", "echo boom-on-stderr >&2; exit 3"}}},
		func(m *Manager) {
			m.policy = backoff{initial: 10 * time.Millisecond, max: 40 * time.Millisecond, healthy: time.Hour}
		})
	h.start()
	var delays []time.Duration
	for range 5 {
		delays = append(delays, next(t, "a retry", h.ev.retry).delay)
	}
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond}
	if diff := cmp.Diff(want, delays); diff != "" {
		t.Errorf("restart delays (-want +got):\n%s", diff)
	}
	st := h.m.Servers()[0]
	if st.State != StateFailed || st.LastError == "" || st.Tools != 0 || st.NextAttempt.IsZero() {
		t.Errorf("status %+v; want failed, with the last error and the next attempt", st)
	}
	if names := h.names("mcp__"); len(names) != 0 {
		t.Errorf("tools registered for a server that never started: %v", names)
	}
	if !strings.Contains(h.log.String(), "boom-on-stderr") {
		t.Errorf("the server's stderr is not in the debug log:\n%s", h.log.String())
	}
}

func TestCloseDuringCall(t *testing.T) {
	h := newHarness(t, []ServerConfig{{Name: "everything", Command: serverCommand(t, "server-everything", "stdio")}})
	h.start()
	up := next(t, "the session", h.ev.up)
	done := make(chan error, 1)
	go func() {
		_, err := h.call(context.Background(), "mcp__everything__trigger-long-running-operation", `{"duration":30,"steps":30}`)
		done <- err
	}()
	next(t, "the long call", h.ev.call)
	began := time.Now()
	if err := h.m.Close(); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(began)
	if err := next(t, "the call's result", done); !errors.Is(err, ErrClosed) {
		t.Errorf("call cut by Close: %v; want ErrClosed", err)
	}
	if elapsed > 3*time.Second {
		t.Errorf("Close took %s", elapsed)
	}
	t.Logf("Close with a call in flight took %s", elapsed.Round(time.Millisecond))
	if processAlive(up.pid) {
		t.Errorf("server process %d still runs after Close", up.pid)
	}
	if names := h.names("mcp__"); len(names) != 0 {
		t.Errorf("tools still registered after Close: %d", len(names))
	}
	if err := h.m.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Errorf("Start after Close: %v; want ErrStarted", err)
	}
}

// processAlive reports whether pid runs (zombies do not count).
func processAlive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state != 'Z' && state != 'X'
}

func TestCloseKillsProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	argv := serverCommand(t, "server-everything", "stdio")
	// The server starts a helper that would outlive it.
	script := `sleep 300 & echo $! > "$PIDFILE"; exec "$@"`
	h := newHarness(t, []ServerConfig{{
		Name: "everything", Command: append([]string{"sh", "-c", script, "sh"}, argv...), Env: map[string]string{"PIDFILE": pidFile},
	}})
	h.start()
	if got, err := h.call(context.Background(), "mcp__everything__echo", `{"message":"hi"}`); err != nil || got != "Echo: hi" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if !processAlive(child) {
		t.Fatalf("helper %d is not running before Close", child)
	}
	if err := h.m.Close(); err != nil {
		t.Fatal(err)
	}
	if processAlive(child) {
		t.Errorf("helper %d of the server survived Close", child)
	}
}

// TestServerPausedMidCall SIGSTOPs a stdio server while it holds a call: the
// call ends at its timeout (the server is told to cancel), the server is not
// restarted for being slow, and once SIGCONTed it answers the next call.
func TestServerPausedMidCall(t *testing.T) {
	h := newHarness(t, []ServerConfig{{Name: "everything", Command: serverCommand(t, "server-everything", "stdio"),
		Timeout: 500 * time.Millisecond, PingInterval: -time.Second}})
	h.start()
	up := next(t, "the first session", h.ev.up)
	if err := syscall.Kill(up.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err := h.call(context.Background(), "mcp__everything__echo", `{"message":"are you there"}`)
	elapsed := time.Since(began)
	if err == nil {
		t.Fatal("a call to a paused server succeeded")
	}
	if elapsed > 3*time.Second {
		t.Errorf("the call to the paused server took %s; its timeout is 500ms", elapsed)
	}
	t.Logf("call to the paused server ended after %s: %v", elapsed.Round(time.Millisecond), err)
	if err := syscall.Kill(up.pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var out string
	deadline := time.Now().Add(waitLimit)
	for {
		out, err = h.call(context.Background(), "mcp__everything__echo", `{"message":"back"}`)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || !strings.Contains(out, "back") {
		t.Fatalf("after SIGCONT: %q, %v", out, err)
	}
}
