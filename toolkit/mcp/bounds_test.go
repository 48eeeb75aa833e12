package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp/mcptest"
)

// frozenClock stops the flood budget's windows: the budget is then a count
// of messages, whatever the speed of the machine.
func frozenClock() func() time.Time {
	now := time.Now()
	return func() time.Time { return now }
}

// TestFloodingServerFails: a server that sends messages without end —
// notifications it is not asked for, or ping requests while it reads
// nothing of what it is sent — goes over the message budget, is cut off
// and marked failed (not retried), and its process is stopped; the memory
// it made us hold is bounded and Close returns.
func TestFloodingServerFails(t *testing.T) {
	for _, mode := range []string{mcptest.ModeFlood, mcptest.ModeFloodNoRead} {
		t.Run(mode, func(t *testing.T) {
			bad, _ := misbehavingServer(t, "bad", mode)
			// The budget is what this test is about, not hangs.
			bad.PingInterval, bad.HangTimeout = -1, -1
			failed := make(chan error, 1)
			h := newHarness(t, []ServerConfig{bad, goodServer()}, func(m *Manager) {
				m.policy = backoff{initial: time.Hour, max: time.Hour, healthy: time.Hour}
				m.hooks.failed = func(_ string, err error) { offer(failed, err) }
				m.hooks.clock = frozenClock()
				// A smaller budget than floodMessages, the same mechanism:
				// under the race detector a server that reads nothing makes
				// us hold a goroutine per request, and the detector allows
				// 8128 of them.
				m.hooks.floodMessages = 2000
			})
			before := heapInUse()
			h.start()
			up := next(t, "the flooding server up", h.ev.up)
			err := next(t, "the flooding server failed", failed)
			grown := heapInUse() - before
			st := h.m.Servers()[0]
			if st.State != StateFailed || !strings.Contains(st.LastError, "flood: the server sent more than 2000 messages") || !st.NextAttempt.IsZero() {
				t.Errorf("status %+v; want failed for a flood, not retried", st)
			}
			if names := h.names("mcp__bad__"); len(names) != 0 {
				t.Errorf("tools of the failed server still registered: %v", names)
			}
			if processAlive(up.pid) {
				t.Errorf("the flooding server (pid %d) still runs", up.pid)
			}
			if got, err := h.call(context.Background(), "mcp__good__hello", `{}`); err != nil || got != "hello" {
				t.Errorf("the server beside it: %q, %v", got, err)
			}
			if grown > 256<<20 {
				t.Errorf("the heap grew by %d MiB during the flood", grown>>20)
			}
			t.Logf("%v; heap grew by %d MiB", err, grown>>20)
		})
	}
}

// heapInUse is the memory in use for the heap and goroutine stacks, after
// a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse + ms.StackInuse)
}

// TestListChangedIsRateLimited: a server that says its tool list changed
// every 5 ms is listed again at most once per relistInterval.
func TestListChangedIsRateLimited(t *testing.T) {
	chatty, count := misbehavingServer(t, "chatty", mcptest.ModeChatty)
	h := newHarness(t, []ServerConfig{chatty})
	began := time.Now()
	h.start()
	for i := range 20 {
		if got, err := h.call(context.Background(), "mcp__chatty__echo", fmt.Sprintf(`{"message":"m%d"}`, i)); err != nil || got != fmt.Sprintf("echo: m%d", i) {
			t.Fatalf("call %d = %q, %v", i, got, err)
		}
	}
	waitUntil(t, "a few listings", h.ev.synced, func() bool { return listsAnswered(t, count) >= 3 })
	elapsed := time.Since(began)
	lists := listsAnswered(t, count)
	// The first listing, then at most one per interval.
	if limit := 2 + int(elapsed/relistInterval); lists > limit {
		t.Errorf("%d listings in %s; at most %d may be made", lists, elapsed.Round(time.Millisecond), limit)
	}
	if st := h.m.Servers()[0]; st.State != StateUp {
		t.Errorf("status %+v; a server that only says its list changed is not failed", st)
	}
	t.Logf("%d listings in %s", lists, elapsed.Round(time.Millisecond))
}

// TestBigToolsAreBounded: a description over maxDescriptionBytes is cut
// with a note; a tool whose schema is over maxSchemaBytes is left out,
// with the reason in the server's status; the server's other tools serve.
func TestBigToolsAreBounded(t *testing.T) {
	big, _ := misbehavingServer(t, "big", mcptest.ModeBigTools)
	h := newHarness(t, []ServerConfig{big})
	h.start()
	if got, err := h.call(context.Background(), "mcp__big__echo", `{"message":"hi"}`); err != nil || got != "echo: hi" {
		t.Errorf("echo = %q, %v", got, err)
	}
	long := h.tool("mcp__big__long_description")
	if len(long.Description) > maxDescriptionBytes+200 || !strings.Contains(long.Description, "description cut at") {
		t.Errorf("description of %s: %d bytes, ending %q; want it cut to %d bytes with a note",
			long.Name, len(long.Description), long.Description[max(0, len(long.Description)-80):], maxDescriptionBytes)
	}
	if tool, ok := h.reg.Lookup("mcp__big__huge_schema"); ok {
		t.Errorf("a tool with a %d-byte schema is registered", len(tool.Schema))
	}
	st := h.m.Servers()[0]
	if st.State != StateUp || len(st.Skipped) != 1 || st.Skipped[0].Tool != "huge_schema" || !strings.Contains(st.Skipped[0].Reason, "schema") {
		t.Errorf("status %+v; want up, with huge_schema skipped for its schema", st)
	}
}

// TestHTTPResponseBodyIsBounded: a Streamable HTTP server that answers
// tools/list with a JSON body that never ends is cut off after
// maxMessageBytes; the attempt fails (to be retried, as after a crash) and
// the body is not read further.
func TestHTTPResponseBodyIsBounded(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "endless-body", Version: "1"}, nil)
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	var written atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") == "" {
			handler.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"tools/list"`)) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			handler.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		chunk := []byte(strings.Repeat(" ", 64<<10))
		for {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(ts.Close)
	h := newHarness(t, []ServerConfig{{Name: "endless-body", URL: ts.URL, ConnectTimeout: 10 * time.Second}, goodServer()},
		func(m *Manager) { m.policy = backoff{initial: time.Hour, max: time.Hour, healthy: time.Hour} })
	h.start()
	st := h.m.Servers()[0]
	if st.State != StateFailed || !strings.Contains(st.LastError, "a message of more than 16.0 MiB") || st.NextAttempt.IsZero() {
		t.Errorf("status %+v; want failed for an over-long message, to be retried", st)
	}
	if n := written.Load(); n > maxMessageBytes+8<<20 {
		t.Errorf("the client read on: the server wrote %d MiB", n>>20)
	}
	t.Logf("%s; the server wrote %d MiB", st.LastError, written.Load()>>20)
}

// TestGiantResultEndsTheSession: a stdio server answers a call with one line
// of 20 MiB. The line is not read past maxMessageBytes: the call's outcome
// is unknown, the session ends, and the server is restarted (not failed:
// one giant result must not cost the server for good); the next call runs.
func TestGiantResultEndsTheSession(t *testing.T) {
	giant, _ := misbehavingServer(t, "giant", mcptest.ModeGiantResult)
	// Writing 20 MiB may keep the server from answering pings for a
	// while; this test is not about hangs.
	giant.PingInterval, giant.HangTimeout = -1, -1
	h := newHarness(t, []ServerConfig{giant}, func(m *Manager) {
		m.policy = backoff{initial: 100 * time.Millisecond, max: time.Second, healthy: time.Hour}
	})
	h.start()
	first := next(t, "the first session", h.ev.up)
	before := heapInUse()
	_, err := h.call(context.Background(), "mcp__giant__giant", `{}`)
	grown := heapInUse() - before
	if !errors.Is(err, toolkit.ErrOutcomeUnknown) {
		t.Errorf("the giant call: %v; want its outcome unknown", err)
	}
	if got, err := h.call(context.Background(), "mcp__giant__echo", `{"message":"after"}`); err != nil || got != "echo: after" {
		t.Errorf("the next call = %q, %v", got, err)
	}
	second := next(t, "the restarted session", h.ev.up)
	if second.pid == first.pid {
		t.Errorf("the server was not restarted")
	}
	if st := h.m.Servers()[0]; st.State != StateUp || st.Restarts != 1 || !strings.Contains(st.LastError, "more than 16.0 MiB") {
		t.Errorf("status %+v; want up after one restart, the giant message as the last error", st)
	}
	t.Logf("giant call: %v; heap grew by %d MiB", err, grown>>20)
}

// TestHTTPEventFloodFails: a Streamable HTTP server answers a call with
// notifications without end on the call's event stream. The events count
// against the flood budget: the server is cut off and marked failed, not
// retried; the call's outcome is unknown.
func TestHTTPEventFloodFails(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "event-flood", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "flood", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i := 0; ctx.Err() == nil; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: "flood", Progress: float64(i)}); err != nil {
					return nil, err
				}
			}
			return nil, ctx.Err()
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	failed := make(chan error, 1)
	// The call lasts until the budget is spent, which takes a while under
	// the race detector.
	h := newHarness(t, []ServerConfig{{Name: "event-flood", URL: ts.URL, Timeout: 2 * time.Minute}}, func(m *Manager) {
		m.hooks.failed = func(_ string, err error) { offer(failed, err) }
		m.hooks.clock = frozenClock()
		m.hooks.floodMessages = 2000
	})
	h.start()
	_, err := h.call(context.Background(), "mcp__event-flood__flood", `{}`)
	if !errors.Is(err, toolkit.ErrOutcomeUnknown) && !errors.Is(err, toolkit.ErrNotSent) {
		t.Errorf("the flooding call: %v; want its outcome unknown", err)
	}
	if err := next(t, "the server failed", failed); !strings.Contains(err.Error(), "flood") {
		t.Errorf("failure: %v; want the flood budget", err)
	}
	if st := h.m.Servers()[0]; st.State != StateFailed || !st.NextAttempt.IsZero() || st.Tools != 0 {
		t.Errorf("status %+v; want failed, not retried", st)
	}
	t.Logf("the flooding call: %v", err)
}
