package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/integration_test/otlptest"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// syncWriter is a buffer the dispatcher's goroutines may log to.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// otlpTracer returns a tracer that exports over OTLP/HTTP to a receiver in
// the test process, and a flush that sends every ended span.
func otlpTracer(t *testing.T) (trace.Tracer, *otlptest.Receiver, func()) {
	t.Helper()
	rcv := otlptest.Start()
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(rcv.TracesURL()))
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewSchemaless()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t.Cleanup(func() {
		if err := tp.Shutdown(ctx); err != nil {
			t.Errorf("tracer provider shutdown: %v", err)
		}
		rcv.Close()
	})
	flush := func() {
		t.Helper()
		if err := tp.ForceFlush(ctx); err != nil {
			t.Fatalf("flushing spans: %v", err)
		}
		if bad := rcv.Refused(); len(bad) > 0 {
			t.Fatalf("the receiver refused exports: %v", bad)
		}
	}
	return tp.Tracer("github.com/tooldispatch/tooldispatch"), rcv, flush
}

// callerContext is the context of a caller that is inside a trace of its own.
func callerContext(t *testing.T) (context.Context, trace.SpanContext) {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(context.Background(), sc), sc
}

// tracedTurn: two calls that run (one fails), one de-duplicated and one
// invalid (decided in pass 1). The arguments carry a marker that must
// appear in no span.
const argMarker = "arg-value-never-traced"

func tracedTurn() *messages.DispatchTurn {
	return turn("traced", "r",
		call("c1", "echo", `{"x":"`+argMarker+`"}`),
		call("c2", "fail", `{}`),
		call("c3", "echo", `{"x":"`+argMarker+`"}`),
		call("c4", "nosuchtool", `{}`),
	)
}

// TestTraceOfATurn: the spans of a turn reach an OTLP/HTTP receiver with
// their names, parents and attributes, under the caller's trace (the span
// of Dispatch's context), and the turn's log line carries its trace ids.
func TestTraceOfATurn(t *testing.T) {
	tracer, rcv, flush := otlpTracer(t)
	logs := &syncWriter{}
	h := newHarness(t, func(c *Config) {
		c.Tracer = tracer
		c.Logger = zerolog.New(logs).Level(zerolog.DebugLevel)
	})
	ctx, caller := callerContext(t)
	r, err := h.d.Dispatch(ctx, tracedTurn())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(statuses(r), " "); got != "c1=ok c2=error c3=deduped c4=unknown_tool" {
		t.Fatalf("statuses: %s", got)
	}
	flush()
	spans := otlptest.Trace(rcv.Spans(), caller.TraceID().String())
	t.Logf("the turn's trace:\n%s", otlptest.Tree(spans, "gen_ai.tool.call.id", "tooldispatch.status", "error.type"))

	one := func(name string) otlptest.Span {
		t.Helper()
		s := otlptest.Named(spans, name)
		if len(s) != 1 {
			t.Fatalf("%d spans named %q in the caller's trace, want 1 (all: %+v)", len(s), name, spans)
		}
		return s[0]
	}
	dispatch, turnSpan := one(spanDispatch), one(spanTurn)
	pre, exec, commit := one(spanPreflight), one(spanExecute), one(spanCommit)
	parents := []struct {
		child  otlptest.Span
		parent string
	}{
		{dispatch, caller.SpanID().String()},
		{turnSpan, dispatch.SpanID},
		{pre, turnSpan.SpanID},
		{exec, turnSpan.SpanID},
		{commit, turnSpan.SpanID},
	}
	for _, p := range parents {
		if p.child.ParentID != p.parent {
			t.Errorf("%s: parent %s, want %s", p.child.Name, p.child.ParentID, p.parent)
		}
	}
	if !(pre.End <= exec.Start && exec.End <= commit.Start) {
		t.Errorf("passes out of order: preflight %d-%d, execute %d-%d, commit %d-%d", pre.Start, pre.End, exec.Start, exec.End, commit.Start, commit.End)
	}
	wantTurn := map[string]string{"tooldispatch.session": "traced", "tooldispatch.run": "r", "tooldispatch.turn": "1",
		"tooldispatch.calls": "4", "tooldispatch.messages": "4", "tooldispatch.provider": toolkit.ProviderClaudeCode}
	for k, v := range wantTurn {
		if turnSpan.Attrs[k] != v {
			t.Errorf("turn span %s = %q, want %q", k, turnSpan.Attrs[k], v)
		}
	}
	if pre.Attrs["tooldispatch.calls.decided"] != "2" || pre.Attrs["tooldispatch.calls.run"] != "2" {
		t.Errorf("preflight attributes: %v", pre.Attrs)
	}

	calls := otlptest.Named(spans, "execute_tool echo")
	calls = append(calls, otlptest.Named(spans, "execute_tool fail")...)
	if len(calls) != 2 {
		t.Fatalf("%d execute_tool spans, want 2 (the calls that ran)", len(calls))
	}
	want := map[string]map[string]string{
		"c1": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo", "gen_ai.tool.type": "function",
			"tooldispatch.status": "ok", "tooldispatch.args.bytes": fmt.Sprint(len(`{"x":"` + argMarker + `"}`)), "tooldispatch.tool.source": "builtin"},
		"c2": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fail", "gen_ai.tool.type": "function",
			"tooldispatch.status": "error", "error.type": "error"},
	}
	for _, c := range calls {
		id := c.Attrs["gen_ai.tool.call.id"]
		if c.ParentID != exec.SpanID {
			t.Errorf("execute_tool %s: parent %s, want the execute span %s", id, c.ParentID, exec.SpanID)
		}
		if c.Kind != "SPAN_KIND_INTERNAL" {
			t.Errorf("execute_tool %s: kind %s", id, c.Kind)
		}
		for k, v := range want[id] {
			if c.Attrs[k] != v {
				t.Errorf("execute_tool %s: %s = %q, want %q", id, k, c.Attrs[k], v)
			}
		}
		if _, ok := c.Attrs["error.type"]; ok != (id == "c2") {
			t.Errorf("execute_tool %s: error.type %q", id, c.Attrs["error.type"])
		}
		if (c.StatusCode == "STATUS_CODE_ERROR") != (id == "c2") {
			t.Errorf("execute_tool %s: status %s", id, c.StatusCode)
		}
	}
	for _, s := range spans {
		for k, v := range s.Attrs {
			if strings.Contains(v, argMarker) {
				t.Errorf("span %s attribute %s carries an argument value", s.Name, k)
			}
		}
	}

	var done map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["message"] == "turn done" {
			done = m
		}
	}
	if done == nil || done[logTraceID] != caller.TraceID().String() || done[logSpanID] != turnSpan.SpanID {
		t.Errorf("the turn's log line: %v, want trace_id %s span_id %s\nlogs:\n%s", done, caller.TraceID(), turnSpan.SpanID, logs)
	}
}

// TestTraceparentOfTheTurn: a turn that names its caller's trace in
// traceparent (the wire field a cluster member or the run envelope sets)
// is traced under it, with tracestate kept; an unparsable traceparent
// starts a trace of its own.
func TestTraceparentOfTheTurn(t *testing.T) {
	tracer, rcv, flush := otlpTracer(t)
	h := newHarness(t, func(c *Config) { c.Tracer = tracer })
	tt := turn("tp", "r", call("c1", "echo", `{}`))
	tt.Traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tt.Tracestate = "vendor=opaque"
	h.dispatch(tt)
	bad := turn("tp", "r", call("c2", "echo", `{"ms":2}`))
	bad.Traceparent = "not a trace context"
	h.dispatch(bad)
	flush()
	spans := rcv.Spans()
	traced := otlptest.Trace(spans, "0af7651916cd43dd8448eb211c80319c")
	t.Logf("under the traceparent:\n%s", otlptest.Tree(traced))
	d := otlptest.Named(traced, spanDispatch)
	if len(d) != 1 || d[0].ParentID != "b7ad6b7169203331" || len(otlptest.Named(traced, spanTurn)) != 1 {
		t.Fatalf("the turn is not a child of its traceparent: %+v", traced)
	}
	turns := otlptest.Named(spans, spanTurn)
	if len(turns) != 2 {
		t.Fatalf("%d turn spans, want 2", len(turns))
	}
	for _, s := range turns {
		if s.TraceID == "0af7651916cd43dd8448eb211c80319c" {
			continue
		}
		own := otlptest.Trace(spans, s.TraceID)
		root := otlptest.Named(own, spanDispatch)
		if len(root) != 1 || root[0].ParentID != "" || s.ParentID != root[0].SpanID {
			t.Errorf("the turn with a bad traceparent is not in a trace of its own:\n%s", otlptest.Tree(own))
		}
	}
}

// TestTraceContextPassedOnWhenOff: without a tracer nothing is traced, and
// the caller's trace context still reaches the turn (for the member that
// owns the session) in the prepared request, while the caller's own turn
// is not changed; without a trace context none is made up.
func TestTraceContextPassedOnWhenOff(t *testing.T) {
	h := newHarness(t, nil)
	ctx, caller := callerContext(t)
	in := turn("s", "r", call("c1", "echo", `{}`))
	p, err := h.d.Prepare(in)
	if err != nil {
		t.Fatal(err)
	}
	span := h.d.cfg.startDispatch(ctx, p.Turn())
	if span.SpanContext().IsValid() {
		t.Fatalf("off: span %v", span)
	}
	if want := "00-" + caller.TraceID().String() + "-" + caller.SpanID().String() + "-01"; p.Turn().Traceparent != want || in.Traceparent != "" {
		t.Errorf("traceparent %q (caller's turn %q), want %q", p.Turn().Traceparent, in.Traceparent, want)
	}
	none, err := h.d.Prepare(in)
	if err != nil {
		t.Fatal(err)
	}
	if h.d.cfg.startDispatch(context.Background(), none.Turn()); none.Turn().Traceparent != "" {
		t.Errorf("a turn without trace context got %q", none.Turn().Traceparent)
	}
}

// TestTracingOffAllocatesNothing: with tracing off the hooks on a turn's
// path allocate nothing.
func TestTracingOffAllocatesNothing(t *testing.T) {
	var c Config
	tt := turn("s", "r", call("c1", "echo", `{}`))
	p := &callPlan{id: "c1", name: "echo", tool: &toolkit.Tool{Name: "echo"}}
	m := &messages.ToolMessage{Status: "ok"}
	r := &messages.TurnResult{}
	log := zerolog.Nop()
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		span := c.startDispatch(ctx, tt)
		tr := startTurnTrace(&c, "s", "r", "openai", tt, "")
		l := tr.logger(log)
		tr.numbered(1)
		tr.startPreflight()
		tr.preflightDone(nil, 1)
		tr.startExecute(1)
		cs := tr.startCall(p)
		_ = callContext(ctx, cs)
		endCall(cs, m)
		tr.startCommit(1)
		tr.end(r)
		logTurn(l, "s", r, time.Time{})
		span.End()
	})
	if allocs != 0 {
		t.Errorf("tracing off: %v allocations per turn's hooks, want 0", allocs)
	}
}

// BenchmarkTracing dispatches 100-call no-op turns with tracing off (no
// tracer), with a no-op tracer, and with the SDK recording every span (an
// exporter that drops them); allocs/op off are those without tracing code.
func BenchmarkTracing(b *testing.B) {
	modes := []struct {
		name   string
		tracer func(b *testing.B) trace.Tracer
	}{
		{"off", func(*testing.B) trace.Tracer { return nil }},
		{"noop", func(*testing.B) trace.Tracer { return noop.NewTracerProvider().Tracer("") }},
		{"sdk", func(b *testing.B) trace.Tracer {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			return tp.Tracer("")
		}},
	}
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			store := cachestore.NewMemory()
			d, err := New(Config{Registry: noopRegistry(), Store: store, MaxConcurrency: 3, Tracer: m.tracer(b)})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := d.Dispatch(ctx, noopTurn("bench", i, 100)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/call")
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_ = d.Close(cctx)
			_ = store.Close()
		})
	}
}

// discard is a span exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }
