package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp/mcptest"
)

// collector gathers a call's streamed pieces.
type collector struct {
	mu     sync.Mutex
	pieces []string
}

func (c *collector) emit(s string) {
	c.mu.Lock()
	c.pieces = append(c.pieces, s)
	c.mu.Unlock()
}

func (c *collector) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.pieces...)
}

// runStreaming calls tool with args, its streamed output going to col.
func (h *harness) runStreaming(ctx context.Context, name, args string, col *collector) (toolkit.Result, error) {
	h.t.Helper()
	tool := h.tool(name)
	a, err := toolkit.ParseArgs(args, toolkit.Limits{})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, tool.EffectiveTimeout())
	defer cancel()
	return tool.Handler(ctx, &toolkit.Call{ID: "c1", Name: tool.Name, Args: a, Emit: col.emit})
}

// TestProgressIsThrottled: a server that sends 500 progress updates for a
// call without pause (and one for a token no call has) gets one progress
// line per progressInterval on the call's stream: on a frozen clock, one
// line, and the call's next line would say how many were not shown. No
// line carries the server's line break, and nothing is streamed after the
// call returned.
func TestProgressIsThrottled(t *testing.T) {
	srv, _ := misbehavingServer(t, "chatty", mcptest.ModeProgressFlood)
	h := newHarness(t, []ServerConfig{srv}, func(m *Manager) { m.hooks.clock = frozenClock() })
	h.start()
	col := &collector{}
	res, err := h.runStreaming(context.Background(), "mcp__chatty__echo", `{"message":"hi"}`, col)
	if err != nil || res.Content != "echo: hi" {
		t.Fatalf("echo = %q, %v", res.Content, err)
	}
	got := col.all()
	if len(got) != 1 {
		t.Fatalf("%d progress lines for %d updates on a frozen clock, want 1: %q", len(got), mcptest.ProgressFloodCount, got)
	}
	if want := "progress 1/500: step 1 next: forged\n"; got[0] != want {
		t.Errorf("progress line = %q, want %q", got[0], want)
	}
	if strings.Count(got[0], "\n") != 1 {
		t.Errorf("a progress line holds the server's line breaks: %q", got[0])
	}
}

// TestProgressLineCountsSkippedUpdates: updates within progressInterval
// of the last line shown are counted, and the next line shown says how
// many were not.
func TestProgressLineCountsSkippedUpdates(t *testing.T) {
	col := &collector{}
	f := &inflight{call: &toolkit.Call{Emit: col.emit}}
	t0 := time.Unix(1_700_000_000, 0)
	f.progress(t0, 1, 10, "one")
	f.progress(t0.Add(progressInterval/2), 2, 10, "two")
	f.progress(t0.Add(progressInterval-1), 3, 10, "three")
	f.progress(t0.Add(progressInterval), 4, 0, "")
	f.ended = true
	f.progress(t0.Add(10*progressInterval), 5, 10, "after the end")
	want := []string{"progress 1/10: one\n", "progress 4 (2 earlier updates not shown)\n"}
	if got := col.all(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines = %q, want %q", got, want)
	}
}

// TestServerLogsAreBounded: a server's log notifications are written to
// our log with the server's name at the matching level, each as one JSON
// record whose data is a string field (no line or field of the server's
// making), at most logBudget per logWindow; the dropped ones are counted
// in a record of their own when the window ends.
func TestServerLogsAreBounded(t *testing.T) {
	srv, _ := misbehavingServer(t, "noisy", mcptest.ModeLogLines)
	var clockMu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		clockMu.Lock()
		defer clockMu.Unlock()
		return now
	}
	h := newHarness(t, []ServerConfig{srv}, func(m *Manager) { m.hooks.clock = clock })
	h.start()
	if got, err := h.call(context.Background(), "mcp__noisy__echo", `{"message":"hi"}`); err != nil || got != "echo: hi" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	clockMu.Lock()
	now = now.Add(logWindow)
	clockMu.Unlock()
	if _, err := h.call(context.Background(), "mcp__noisy__echo", `{"message":"again"}`); err != nil {
		t.Fatal(err)
	}
	// Log messages are handled in the order they came, before the call's
	// answer: every record is in.
	var records []map[string]any
	sc := bufio.NewScanner(strings.NewReader(h.log.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("a log line is not one JSON record: %v: %q", err, sc.Text())
		}
		if r["forged"] != nil || r["message"] == "forged" {
			t.Fatalf("a server forged a log record: %v", r)
		}
		records = append(records, r)
	}
	n, dropped := 0, 0
	for _, r := range records {
		if r["message"] == "MCP server log" {
			n++
		}
		if d, ok := r["dropped"].(float64); ok {
			dropped += int(d)
		}
	}
	if n != 2*logBudget || dropped != mcptest.LogLinesCount-logBudget {
		t.Fatalf("%d server log records and %d dropped; want %d written (%d per window) and %d dropped in the first window",
			n, dropped, 2*logBudget, logBudget, mcptest.LogLinesCount-logBudget)
	}
	levels := map[string]string{}
	for _, r := range records {
		if r["message"] != "MCP server log" {
			continue
		}
		if r["server"] != "noisy" {
			t.Fatalf("a server log record does not name the server: %v", r)
		}
		if r["data"] != mcptest.LogInjection {
			t.Fatalf("data = %q, want the server's text as one string field", r["data"])
		}
		if r["mcp_logger"] != "mcptest forged" {
			t.Fatalf("mcp_logger = %q, want the server's logger name on one line", r["mcp_logger"])
		}
		levels[r["mcp_level"].(string)] = r["level"].(string)
	}
	want := map[string]string{"debug": "debug", "info": "info", "notice": "info", "warning": "warn", "error": "error",
		"critical": "error", "alert": "error", "emergency": "error", "bogus": "info"}
	for l, w := range want {
		if levels[l] != w {
			t.Errorf("MCP level %s logged at %q, want %s", l, levels[l], w)
		}
	}
}
