package service

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// stubbornTool ignores its context until release is closed: the dispatcher
// abandons its calls after the timeout.
func stubbornTool(release <-chan struct{}) toolkit.Tool {
	return toolkit.Tool{
		Name: "stubborn", Description: "Blocks, ignoring cancellation.",
		Schema:  []byte(`{"type":"object"}`),
		Timeout: 50 * time.Millisecond, ReadOnly: true,
		Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) {
			<-release
			return toolkit.Result{Content: "late"}, nil
		},
	}
}

// TestMetricsScrape scrapes /metrics after a few turns: every series is
// there, and the counts match what the turns did.
func TestMetricsScrape(t *testing.T) {
	release := make(chan struct{})
	f := newFixture(t, fixtureOpts{tools: []toolkit.Tool{stubbornTool(release)}, watchdogGrace: 10 * time.Millisecond})
	t.Cleanup(func() { close(release) })
	const s = "metrics-s"

	// Turn 1: four calls run, one names no tool.
	r := f.postTurn(s, turn("r1", "all",
		call(t, "c1", "calculate", map[string]any{"expression": "1 + 1"}),
		call(t, "c2", "calculate", map[string]any{"expression": "2 + 2"}),
		call(t, "c3", "read_files", map[string]any{"paths": []string{"notes.md"}}),
		call(t, "c4", "no_such_tool", map[string]any{}),
		call(t, "c5", "edit_file", map[string]any{"path": "m.txt", "content": "m"})))
	if got := statuses(r.Messages); got[3] != "unknown_tool" {
		t.Fatalf("turn 1: %v", got)
	}
	// Turn 2: nothing runs (a denied policy and a repeat).
	f.postTurn(s, turn("r1", "none",
		call(t, "c1", "edit_file", map[string]any{"path": "m.txt", "content": "n"}),
		call(t, "c2", "calculate", map[string]any{"expression": "1 + 1"})))
	// Turn 3: a confirmation, approved.
	events := f.openSSE("GET", "/v1/sessions/"+s+"/events", nil, "")
	done := f.postTurnAsync(t.Context(), s, turn("r1", "ask", call(t, "c1", "edit_file", map[string]any{"path": "m.txt", "content": "o"})))
	asked := events.until("tool_confirm", "c1")
	if resp, body := f.do("POST", "/v1/sessions/"+s+"/confirm/c1", map[string]any{"approve": true, "args_hash": asked.ArgsHash}); resp.StatusCode != http.StatusOK {
		t.Fatalf("confirm: %d %s", resp.StatusCode, body)
	}
	if res := awaitTurn(t, done); res.code != http.StatusOK {
		t.Fatalf("turn 3: %d %s", res.code, res.body)
	}
	// Turn 4: a call that ignores its timeout is abandoned.
	if r := f.postTurn(s, turn("r1", "all", call(t, "c1", "stubborn", map[string]any{}))); r.Messages[0].Status != "timeout" {
		t.Fatalf("turn 4: %v", statuses(r.Messages))
	}
	// The dispatcher reports cache lookups only for the tools with a result
	// cache (fetch_page, search_web, http_request), which this fixture does
	// not register: report two through the Observer.
	f.metrics.Cache("read_files", true)
	f.metrics.Cache("read_files", false)

	resp, body := f.do("GET", "/metrics", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	family := func(name string) *dto.MetricFamily {
		t.Helper()
		mf, ok := fams[name]
		if !ok {
			t.Fatalf("series %s missing from the scrape", name)
		}
		return mf
	}
	sum := func(name string, labels map[string]string) float64 {
		var total float64
		for _, m := range family(name).GetMetric() {
			if hasLabels(m, labels) {
				total += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			}
		}
		return total
	}
	tests := []struct {
		name   string
		series string
		labels map[string]string
		want   float64 // -1: any positive value
	}{
		{"every call", "tooldispatch_calls_total", nil, 9},
		{"calculate ok", "tooldispatch_calls_total", map[string]string{"tool": "calculate", "status": "ok"}, 2},
		{"calculate deduped", "tooldispatch_calls_total", map[string]string{"tool": "calculate", "status": "deduped"}, 1},
		{"unknown tool", "tooldispatch_calls_total", map[string]string{"tool": "other", "status": "unknown_tool"}, 1},
		{"edit_file skipped", "tooldispatch_calls_total", map[string]string{"tool": "edit_file", "status": "skipped"}, 1},
		{"stubborn timeout", "tooldispatch_calls_total", map[string]string{"tool": "stubborn", "status": "timeout"}, 1},
		{"slot waits", "tooldispatch_slot_wait_seconds", nil, 6},
		{"calculate runs", "tooldispatch_exec_seconds", map[string]string{"tool": "calculate"}, 2},
		{"commits", "tooldispatch_commit_seconds", nil, 4},
		{"confirmations", "tooldispatch_confirm_wait_seconds", nil, 1},
		{"in flight", "tooldispatch_calls_in_flight", nil, 0},
		{"cache hits", "tooldispatch_cache_requests_total", map[string]string{"tool": "read_files", "result": "hit"}, 1},
		{"cache misses", "tooldispatch_cache_requests_total", map[string]string{"tool": "read_files", "result": "miss"}, 1},
		{"abandoned", "tooldispatch_abandoned_calls_total", map[string]string{"tool": "stubborn"}, 1},
		// turn 4's call has not returned yet: its goroutine still runs
		{"abandoned running", "tooldispatch_abandoned_calls_running", nil, -1},
		{"turn requests", "tooldispatch_http_requests_total", map[string]string{"route": "POST /v1/sessions/{session}/turns", "code": "200"}, 4},
		{"confirm requests", "tooldispatch_http_requests_total", map[string]string{"route": "POST /v1/sessions/{session}/confirm/{call_id}", "code": "200"}, 1},
		{"request durations", "tooldispatch_http_request_duration_seconds", map[string]string{"route": "POST /v1/sessions/{session}/turns"}, 4},
		{"go collector", "go_goroutines", nil, -1},
		{"process collector", "process_resident_memory_bytes", nil, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sum(tt.series, tt.labels)
			if (tt.want < 0 && got <= 0) || (tt.want >= 0 && got != tt.want) {
				t.Errorf("%s%v = %v, want %v", tt.series, tt.labels, got, tt.want)
			}
		})
	}
	for _, name := range []string{"tooldispatch_exec_seconds", "tooldispatch_commit_seconds"} {
		for _, m := range family(name).GetMetric() {
			if h := m.GetHistogram(); h.GetSampleCount() > 0 && h.GetSampleSum() <= 0 {
				t.Errorf("%s has %d samples summing to %v", name, h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}
