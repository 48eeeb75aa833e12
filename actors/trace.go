package actors

import (
	"context"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Tracing of turns (OpenTelemetry). With Config.Tracer nil, the default,
// every hook below returns at its first line: no span, no allocation.
//
// A turn's trace:
//
//	tooldispatch.dispatch          the API call (Dispatch), on the member it reached
//	└─ tooldispatch.turn           on the member that owns the session
//	   ├─ tooldispatch.preflight   pass 1
//	   ├─ tooldispatch.execute     pass 2 (absent when no call runs)
//	   │  └─ execute_tool NAME     one per call that runs (GenAI conventions)
//	   └─ tooldispatch.commit      pass 3
//
// An answer, a confirmation or a client result is a span of its own
// (tooldispatch.answer, .confirm, .client_result) on the member it reached,
// child of the caller's context, with a tooldispatch.deliver child where the
// session runs; a cancellation's delivery is a child of its turn's dispatch
// span.
//
// The caller's trace context comes in as DispatchTurn.traceparent (the
// service's traceparent header, the run envelope's traceparent field) or as
// the span of Dispatch's context.Context; it crosses members inside the
// DispatchTurn. Attributes carry ids, names, statuses and sizes, never
// argument values, results or secrets.

// Span names.
const (
	spanDispatch  = "tooldispatch.dispatch"
	spanTurn      = "tooldispatch.turn"
	spanPreflight = "tooldispatch.preflight"
	spanExecute   = "tooldispatch.execute"
	spanCommit    = "tooldispatch.commit"
	// spanExecuteTool is followed by the tool's name, as the GenAI
	// conventions name the span ("execute_tool {gen_ai.tool.name}").
	spanExecuteTool = "execute_tool"

	// The other requests: the API call on the member it reached, and its
	// delivery on the session's member (tooldispatch.request names it).
	spanAnswer       = "tooldispatch.answer"
	spanConfirm      = "tooldispatch.confirm"
	spanClientResult = "tooldispatch.client_result"
	spanDeliver      = "tooldispatch.deliver"
)

// Attribute keys: the GenAI semantic conventions' and tooldispatch's own.
const (
	attrOperation  = attribute.Key("gen_ai.operation.name")
	attrToolName   = attribute.Key("gen_ai.tool.name")
	attrToolCallID = attribute.Key("gen_ai.tool.call.id")
	attrToolType   = attribute.Key("gen_ai.tool.type")
	attrErrorType  = attribute.Key("error.type")

	attrSession     = attribute.Key("tooldispatch.session")
	attrRun         = attribute.Key("tooldispatch.run")
	attrTurn        = attribute.Key("tooldispatch.turn")
	attrTurnID      = attribute.Key("tooldispatch.turn_id")
	attrProvider    = attribute.Key("tooldispatch.provider")
	attrMember      = attribute.Key("tooldispatch.member")
	attrCalls       = attribute.Key("tooldispatch.calls")
	attrDecided     = attribute.Key("tooldispatch.calls.decided")
	attrRunning     = attribute.Key("tooldispatch.calls.run")
	attrReplayed    = attribute.Key("tooldispatch.replayed")
	attrStatus      = attribute.Key("tooldispatch.status")
	attrToolSource  = attribute.Key("tooldispatch.tool.source")
	attrArgsBytes   = attribute.Key("tooldispatch.args.bytes")
	attrResultBytes = attribute.Key("tooldispatch.result.bytes")
	attrInjected    = attribute.Key("tooldispatch.injected")
	attrMessages    = attribute.Key("tooldispatch.messages")
	attrRequest     = attribute.Key("tooldispatch.request")
)

// Log fields that tie a turn's log lines to its trace.
const (
	logTraceID = "trace_id"
	logSpanID  = "span_id"
)

var traceContext propagation.TraceContext

// toolType is gen_ai.tool.type of a tool's source. The conventions know
// three: "function" (the model fills in the arguments and the application
// runs the code), "extension" (the agent calls an external API or service)
// and "datastore" (retrieval from a data store). Built-in, script, host and
// client tools are functions; MCP servers and ext_ HTTP endpoints are
// extensions. No source is a data store as a whole, so "datastore" is not
// used.
func toolType(s toolkit.Source) string {
	switch s {
	case toolkit.SourceMCP, toolkit.SourceExt:
		return "extension"
	}
	return "function"
}

// noopSpan is what the hooks return when tracing is off.
var noopSpan trace.Span = noop.Span{}

// startDispatch opens the span of one Dispatch call, child of the caller's
// trace (t.Traceparent, else ctx's span), and makes the span t's
// traceparent; t is the prepared request, the dispatcher's own copy.
// Without a tracer it passes on ctx's span context only, when there is one
// and t has none.
func (c *Config) startDispatch(ctx context.Context, t *messages.DispatchTurn) trace.Span {
	if c.Tracer == nil {
		if t.Traceparent != "" {
			return noopSpan
		}
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			t.Traceparent, t.Tracestate = encodeTraceContext(sc)
		}
		return noopSpan
	}
	parent := ctx
	if t.Traceparent != "" {
		parent = extractTurnContext(ctx, t)
	}
	_, span := c.Tracer.Start(parent, spanDispatch, trace.WithAttributes(
		attrSession.String(t.Session), attrRun.String(t.Run), attrCalls.Int(len(t.Message.GetToolCalls()))))
	t.Traceparent, t.Tracestate = encodeTraceContext(span.SpanContext())
	return span
}

// encodeTraceContext is sc as W3C traceparent and tracestate values.
func encodeTraceContext(sc trace.SpanContext) (traceparent, tracestate string) {
	carrier := propagation.MapCarrier{}
	traceContext.Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)
	return carrier["traceparent"], carrier["tracestate"]
}

// startRequest opens the span of one request other than a turn (an
// answer, a confirmation, a client result: name), child of ctx's span, and
// returns the trace context to send with it, which the session's member
// continues (traceDelivery). Without a tracer it passes on ctx's span
// context, when there is one.
func (c *Config) startRequest(ctx context.Context, name, session, callID string) (traceparent, tracestate string, span trace.Span) {
	span = noopSpan
	sc := trace.SpanContextFromContext(ctx)
	if c.Tracer != nil {
		_, span = c.Tracer.Start(ctx, name, trace.WithAttributes(attrSession.String(session), attrToolCallID.String(callID)))
		sc = span.SpanContext()
	}
	if !sc.IsValid() {
		return "", "", span
	}
	traceparent, tracestate = encodeTraceContext(sc)
	return traceparent, tracestate, span
}

// endRequest ends a request's span, marking it failed when err is set.
func endRequest(span trace.Span, err error) {
	if err != nil {
		span.SetAttributes(attrErrorType.String(requestErrorType(err)))
		span.SetStatus(codes.Error, requestErrorType(err))
	}
	span.End()
}

// requestErrorType is error.type of a request's error: the protocol's
// names, never the error's text (it may name arguments).
func requestErrorType(err error) string {
	if s := ackError(err); s == ackNoPending || s == ackAlreadyAnswered || s == ackClosed {
		return s
	}
	return "request_failed"
}

// traceDelivery records on the session's member that a request of the
// session protocol (request: its message name) reached the session: a
// span child of the request's trace context (traceparent, tracestate),
// ended at once, with outcome as error.type when it failed. Nothing without a
// tracer or a trace context.
func (c *shared) traceDelivery(ctx actor.Context, request, traceparent, tracestate, session, callID, outcome string) {
	if c.Tracer == nil || traceparent == "" {
		return
	}
	parent := traceContext.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent, "tracestate": tracestate})
	if !trace.SpanContextFromContext(parent).IsValid() {
		return
	}
	attrs := []attribute.KeyValue{attrRequest.String(request), attrSession.String(session)}
	if callID != "" {
		attrs = append(attrs, attrToolCallID.String(callID))
	}
	if c.member {
		attrs = append(attrs, attrMember.String(ctx.ActorSystem().Address()))
	}
	_, span := c.Tracer.Start(parent, spanDeliver, trace.WithAttributes(attrs...))
	if outcome != "" {
		span.SetAttributes(attrErrorType.String(outcome))
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}

// extractTurnContext returns ctx with the remote span context of t's
// traceparent, or ctx when it does not parse.
func extractTurnContext(ctx context.Context, t *messages.DispatchTurn) context.Context {
	return traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": t.Traceparent, "tracestate": t.Tracestate})
}

// turnTrace holds the spans of one turn. A nil *turnTrace (tracing off)
// does nothing.
type turnTrace struct {
	tracer trace.Tracer
	turn   trace.Span
	ctx    context.Context // carries the turn span
	phase  trace.Span      // the open preflight, execute or commit span
	exec   context.Context // carries the execute span
}

// startTurnTrace opens a turn's span, child of the turn's traceparent.
func startTurnTrace(cfg *Config, session, run, provider string, t *messages.DispatchTurn, member string) *turnTrace {
	if cfg.Tracer == nil {
		return nil
	}
	parent := context.Background()
	if t.Traceparent != "" {
		parent = extractTurnContext(parent, t)
	}
	attrs := []attribute.KeyValue{attrSession.String(session), attrRun.String(run), attrProvider.String(provider),
		attrCalls.Int(len(t.Message.GetToolCalls()))}
	if t.TurnId != "" {
		attrs = append(attrs, attrTurnID.String(t.TurnId))
	}
	if member != "" {
		attrs = append(attrs, attrMember.String(member))
	}
	ctx, span := cfg.Tracer.Start(parent, spanTurn, trace.WithAttributes(attrs...))
	return &turnTrace{tracer: cfg.Tracer, turn: span, ctx: ctx}
}

// logger is log with the turn's trace_id and span_id, or log itself.
func (tt *turnTrace) logger(log zerolog.Logger) zerolog.Logger {
	if tt == nil {
		return log
	}
	sc := tt.turn.SpanContext()
	return log.With().Str(logTraceID, sc.TraceID().String()).Str(logSpanID, sc.SpanID().String()).Logger()
}

// numbered records the turn number once it is known.
func (tt *turnTrace) numbered(turn int64) {
	if tt == nil {
		return
	}
	tt.turn.SetAttributes(attrTurn.Int64(turn))
}

// startPreflight opens pass 1's span.
func (tt *turnTrace) startPreflight() {
	if tt == nil {
		return
	}
	tt.startPhase(spanPreflight)
}

// startExecute opens pass 2's span, the parent of the calls' spans.
func (tt *turnTrace) startExecute(run int) {
	if tt == nil {
		return
	}
	tt.exec = tt.startPhase(spanExecute, attrRunning.Int(run))
}

// startCommit opens pass 3's span.
func (tt *turnTrace) startCommit(msgs int) {
	if tt == nil {
		return
	}
	tt.startPhase(spanCommit, attrMessages.Int(msgs))
}

// startPhase opens a pass's span (ending the previous one) and returns its
// context.
func (tt *turnTrace) startPhase(name string, attrs ...attribute.KeyValue) context.Context {
	tt.endPhase()
	ctx, span := tt.tracer.Start(tt.ctx, name, trace.WithAttributes(attrs...))
	tt.phase = span
	return ctx
}

// endPhase ends the open pass's span, with attrs.
func (tt *turnTrace) endPhase(attrs ...attribute.KeyValue) {
	if tt == nil || tt.phase == nil {
		return
	}
	tt.phase.SetAttributes(attrs...)
	tt.phase.End()
	tt.phase = nil
}

// preflightDone ends pass 1's span with how its calls were planned.
func (tt *turnTrace) preflightDone(plans []*callPlan, run int) {
	if tt == nil {
		return
	}
	tt.endPhase(attrDecided.Int(len(plans)-run), attrRunning.Int(run))
}

// startCall opens the execute_tool span of a call that starts now.
func (tt *turnTrace) startCall(p *callPlan) trace.Span {
	if tt == nil {
		return nil
	}
	parent := tt.exec
	if parent == nil {
		parent = tt.ctx
	}
	_, span := tt.tracer.Start(parent, spanExecuteTool+" "+p.name, trace.WithAttributes(
		attrOperation.String("execute_tool"),
		attrToolName.String(p.name),
		attrToolCallID.String(p.id),
		attrToolType.String(toolType(p.tool.Source)),
		attrToolSource.String(string(p.tool.Source)),
		attrArgsBytes.Int(len(p.args.Canonical)),
	))
	return span
}

// endCall ends a call's span with its outcome.
func endCall(span trace.Span, m *messages.ToolMessage) {
	if span == nil {
		return
	}
	span.SetAttributes(attrStatus.String(m.Status), attrResultBytes.Int(len(m.Content)))
	if m.Injected != "" {
		span.SetAttributes(attrInjected.String(m.Injected))
	}
	if m.Status != string(toolkit.StatusOK) {
		span.SetAttributes(attrErrorType.String(m.Status))
		span.SetStatus(codes.Error, m.Status)
	}
	span.End()
}

// end ends the turn's span (and an open pass's) with the turn's result.
func (tt *turnTrace) end(r *messages.TurnResult) {
	if tt == nil {
		return
	}
	if r.Error != "" {
		tt.endPhase(attrErrorType.String("turn_failed"))
	}
	tt.endPhase()
	tt.turn.SetAttributes(attrMessages.Int(len(r.Messages)))
	if r.Turn != 0 {
		tt.turn.SetAttributes(attrTurn.Int64(r.Turn))
	}
	if r.Replayed {
		tt.turn.SetAttributes(attrReplayed.Bool(true))
	}
	switch {
	case r.Conflict:
		tt.turn.SetAttributes(attrErrorType.String("turn_id_conflict"))
		tt.turn.SetStatus(codes.Error, "turn_id conflict")
	case r.Error != "":
		tt.turn.SetAttributes(attrErrorType.String("turn_failed"))
		tt.turn.SetStatus(codes.Error, "turn failed")
	}
	tt.turn.End()
}

// callContext is ctx carrying a call's span, for the tool's own tracing.
func callContext(ctx context.Context, span trace.Span) context.Context {
	if span == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, span)
}

// logTurn writes the turn's closing debug line (with its trace ids when
// traced).
func logTurn(log zerolog.Logger, session string, r *messages.TurnResult, began time.Time) {
	if e := log.Debug(); e.Enabled() {
		e.Str("session", session).Str("turn", strconv.FormatInt(r.Turn, 10)).Int("messages", len(r.Messages)).
			Dur("took", time.Since(began)).Bool("failed", r.Error != "").Msg("turn done")
	}
}
