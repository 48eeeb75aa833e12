package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp/mcptest"
)

// misbehavingServer returns the configuration of a misbehaving server
// (mcptest) in mode, and the file that counts its tools/list answers.
func misbehavingServer(t *testing.T, name, mode string) (ServerConfig, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	count := t.TempDir() + "/lists"
	return ServerConfig{
		Name: name, Command: []string{exe},
		Env: map[string]string{mcptest.Env: mode, mcptest.CountEnv: count},
	}, count
}

// listsAnswered is how many tools/list requests the server behind count
// answered.
func listsAnswered(t *testing.T, count string) int {
	t.Helper()
	st, err := os.Stat(count)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return int(st.Size())
}

// serverProcesses lists the live processes of the misbehaving server whose
// tools/list answers count counts (found by their environment).
func serverProcesses(t *testing.T, count string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(env, []byte(mcptest.CountEnv+"="+count+"\x00")) && processAlive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// goodServer is an in-process server with one tool, hello, that answers
// "hello".
func goodServer() ServerConfig {
	srv := mcp.NewServer(&mcp.Implementation{Name: "good", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "hello", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("hello"), nil
		})
	return ServerConfig{Name: "good", Server: srv}
}

// TestStartUpFailures: a server that fails at start-up is marked failed,
// with the reason in its status and the log, and none of its tools
// registered, while the server beside it serves; Start returns as soon as
// the listing breaks a bound. A server that broke a bound of the listing is
// not retried; one that crashed, timed out or sent a listing that does not
// decode is retried with back-off.
func TestStartUpFailures(t *testing.T) {
	tests := []struct {
		name, mode     string
		connectTimeout time.Duration
		wantErr        string
		retried        bool
		maxLists       int // how many listing pages the server may have answered
	}{
		{name: "endless pages", mode: mcptest.ModeEndlessPages, wantErr: "more than 100 pages", maxLists: maxListPages},
		{name: "huge pages", mode: mcptest.ModeHugePages, wantErr: "more than 8.0 MiB", maxLists: maxListBytes>>20 + 1},
		{name: "malformed listing", mode: mcptest.ModeMalformedList, wantErr: "listing the tools", retried: true, maxLists: 1},
		{name: "crash when listing", mode: mcptest.ModeCrashOnList, wantErr: "listing the tools", retried: true},
		{name: "listing never answered", mode: mcptest.ModeSilentList, connectTimeout: time.Second, wantErr: "within 1s", retried: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad, count := misbehavingServer(t, "bad", tt.mode)
			bad.ConnectTimeout = tt.connectTimeout
			h := newHarness(t, []ServerConfig{bad, goodServer()}, func(m *Manager) {
				// A retry would come after the test.
				m.policy = backoff{initial: time.Hour, max: time.Hour, healthy: time.Hour}
			})
			h.start()
			st := h.m.Servers()[0]
			if st.State != StateFailed || !strings.Contains(st.LastError, tt.wantErr) || st.Tools != 0 {
				t.Errorf("status %+v; want failed with %q and no tools", st, tt.wantErr)
			}
			if retried := !st.NextAttempt.IsZero(); retried != tt.retried {
				t.Errorf("next attempt %v; want retried %v", st.NextAttempt, tt.retried)
			}
			if names := h.names("mcp__bad__"); len(names) != 0 {
				t.Errorf("tools of the failed server registered: %d (%.5v)", len(names), names)
			}
			if n := listsAnswered(t, count); n > tt.maxLists {
				t.Errorf("the server answered %d listing pages; at most %d may be asked for", n, tt.maxLists)
			}
			if pids := serverProcesses(t, count); len(pids) != 0 {
				t.Errorf("processes of the failed server still run: %v", pids)
			}
			if got, err := h.call(context.Background(), "mcp__good__hello", `{}`); err != nil || got != "hello" {
				t.Errorf("the server beside it: %q, %v", got, err)
			}
			if logs := h.log.String(); !strings.Contains(logs, "MCP server failed") || !strings.Contains(logs, tt.wantErr) {
				t.Errorf("the failure and its reason are not in the log:\n%.2000s", logs)
			}
			t.Logf("%s: %s", st.State, st.LastError)
		})
	}
}

// TestServerThatGoesOverALimitLaterFails: a server that was up says its
// list changed, then lists tool pages without end. It is marked failed
// (not retried), its process is stopped and its tools are withdrawn; a call
// that still holds one of them ends "not sent".
func TestServerThatGoesOverALimitLaterFails(t *testing.T) {
	bad, count := misbehavingServer(t, "bad", mcptest.ModeEndlessRelist)
	failed := make(chan error, 1)
	h := newHarness(t, []ServerConfig{bad, goodServer()}, func(m *Manager) {
		m.hooks.failed = func(_ string, err error) { offer(failed, err) }
	})
	h.start()
	echo := h.tool("mcp__bad__echo")
	if got, err := h.call(context.Background(), "mcp__bad__echo", `{"message":"hi"}`); err != nil || got != "echo: hi" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	err := next(t, "the server failed", failed)
	if !errors.Is(err, ErrOverLimit) || !strings.Contains(err.Error(), "more than 100 pages") {
		t.Errorf("failure: %v; want the page bound", err)
	}
	st := h.m.Servers()[0]
	if st.State != StateFailed || st.Tools != 0 || !st.NextAttempt.IsZero() {
		t.Errorf("status %+v; want failed, no tools, not retried", st)
	}
	if names := h.names("mcp__bad__"); len(names) != 0 {
		t.Errorf("tools still registered: %v", names)
	}
	if pids := serverProcesses(t, count); len(pids) != 0 {
		t.Errorf("processes of the failed server still run: %v", pids)
	}
	a, _ := toolkit.ParseArgs(`{"message":"late"}`, toolkit.Limits{})
	if _, err := h.run(context.Background(), echo, a); !errors.Is(err, toolkit.ErrNotSent) || !errors.Is(err, ErrFailedServer) {
		t.Errorf("a call of the withdrawn tool: %v; want ErrNotSent and ErrFailedServer", err)
	}
	if got, err := h.call(context.Background(), "mcp__good__hello", `{}`); err != nil || got != "hello" {
		t.Errorf("the server beside it: %q, %v", got, err)
	}
}
