package actors

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/tooldispatch/tooldispatch/integration_test/otlptest"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// TestTraceOfTheOtherRequests: an answer, a confirmation and a turn's
// cancellation each carry their caller's trace context to the session:
// tooldispatch.answer and tooldispatch.confirm are children of the
// caller's span, each with a tooldispatch.deliver child where the session
// runs; a cancellation's delivery is a child of its turn's dispatch span;
// an answer that finds nothing to answer says so in error.type.
func TestTraceOfTheOtherRequests(t *testing.T) {
	tracer, rcv, flush := otlpTracer(t)
	ctx, caller := callerContext(t)
	h := newHarness(t, func(c *Config) {
		c.Tracer = tracer
		c.Registry.Register(toolkit.Tool{Name: "ask", Description: "Asks the human.", Schema: json.RawMessage(objSchema),
			ReadOnly: true, Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
				a, err := c.Ask(ctx, toolkit.Question{Text: "which?"})
				if err != nil {
					return toolkit.Result{}, err
				}
				return toolkit.Result{Content: "answer " + a.Text}, nil
			}})
	})
	answered := make(chan error, 2)
	confirmed := make(chan *messages.ConfirmAck, 1)
	turnCtx, cancelTurn := context.WithCancel(context.Background())
	defer cancelTurn()
	h.onEv = func(e *messages.Event) {
		switch {
		case e.Kind == toolkit.QuestionText && e.CallId == "q1":
			go func() {
				answered <- h.d.Answer(ctx, e.Session, e.CallId, "blue", false)
				answered <- h.d.Answer(ctx, e.Session, e.CallId, "red", false)
			}()
		case e.Kind == toolkit.QuestionText && e.CallId == "q2":
			cancelTurn() // the client of the second turn goes away
		case e.Kind == "tool_confirm":
			go func() {
				ack, err := h.d.Confirm(ctx, &messages.ConfirmReply{Session: e.Session, CallId: e.CallId, ArgsHash: e.ArgsHash, Approve: true})
				if err != nil {
					t.Error(err)
				}
				confirmed <- ack
			}()
		}
	}
	r := h.dispatch(turn("replies", "r", call("q1", "ask", `{}`)))
	if r.Messages[0].Status != "ok" || r.Messages[0].Content != "answer blue" {
		t.Fatalf("asked turn: %v", r.Messages[0])
	}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != ErrAlreadyAnswered {
		t.Fatalf("second answer: %v", err)
	}
	ask := turn("replies", "r", call("w1", "write", `{"path":"a"}`))
	ask.Approve = ApproveAsk
	if r := h.dispatch(ask); r.Messages[0].Status != "ok" {
		t.Fatalf("confirmed turn: %v", r.Messages[0])
	}
	if ack := <-confirmed; ack.GetStatus() != "accepted" {
		t.Fatalf("confirmation: %v", ack)
	}
	canceled, err := h.d.Dispatch(turnCtx, turn("replies", "r", call("q2", "ask", `{"x":"again"}`)))
	if err != nil || canceled.Messages[0].Status == "ok" {
		t.Fatalf("canceled turn: %v %v", canceled, err)
	}
	t.Logf("the canceled turn: %v", canceled.Messages[0])
	flush()
	spans := otlptest.Trace(rcv.Spans(), caller.TraceID().String())
	t.Logf("the caller's trace:\n%s", otlptest.Tree(spans, "tooldispatch.request", "gen_ai.tool.call.id", "error.type"))

	answers := otlptest.Named(spans, spanAnswer)
	if len(answers) != 2 {
		t.Fatalf("%d answer spans in the caller's trace, want 2", len(answers))
	}
	confirms := otlptest.Named(spans, spanConfirm)
	if len(confirms) != 1 {
		t.Fatalf("%d confirm spans in the caller's trace, want 1", len(confirms))
	}
	delivered := map[string]otlptest.Span{} // by parent
	for _, s := range otlptest.Named(rcv.Spans(), spanDeliver) {
		delivered[s.ParentID] = s
	}
	failed := 0
	for _, a := range append(answers, confirms...) {
		if a.ParentID != caller.SpanID().String() || a.Attrs["tooldispatch.session"] != "replies" {
			t.Errorf("%s: parent %s, attributes %v", a.Name, a.ParentID, a.Attrs)
		}
		d, ok := delivered[a.SpanID]
		if !ok || d.TraceID != a.TraceID {
			t.Errorf("%s %s: no delivery span under it", a.Name, a.SpanID)
			continue
		}
		want := map[string]string{spanAnswer: "AnswerQuestion", spanConfirm: "ConfirmReply"}[a.Name]
		if d.Attrs["tooldispatch.request"] != want || d.Attrs["gen_ai.tool.call.id"] == "" {
			t.Errorf("delivery of %s: %v", a.Name, d.Attrs)
		}
		if a.Attrs["error.type"] == "already_answered" {
			failed++
			if d.Attrs["error.type"] != "already_answered" || a.StatusCode != "STATUS_CODE_ERROR" {
				t.Errorf("the refused answer: %v / delivery %v", a.Attrs, d.Attrs)
			}
		}
	}
	if failed != 1 {
		t.Errorf("%d refused answers traced, want 1", failed)
	}
	// The cancellation, in the canceled turn's own trace.
	var cancel *otlptest.Span
	for _, s := range otlptest.Named(rcv.Spans(), spanDeliver) {
		if s.Attrs["tooldispatch.request"] == "CancelTurn" {
			cancel = &s
		}
	}
	if cancel == nil {
		t.Fatalf("no delivery span of the cancellation:\n%s", otlptest.Tree(rcv.Spans(), "tooldispatch.request"))
	}
	dispatch := otlptest.Named(otlptest.Trace(rcv.Spans(), cancel.TraceID), spanDispatch)
	if len(dispatch) != 1 || cancel.ParentID != dispatch[0].SpanID {
		t.Errorf("the cancellation's delivery is not a child of its turn's dispatch span:\n%s", otlptest.Tree(otlptest.Trace(rcv.Spans(), cancel.TraceID)))
	}
}

// TestRequestTraceContextPassedOnWhenOff: without a tracer the caller's
// span context still travels with an answer; without one, nothing does.
func TestRequestTraceContextPassedOnWhenOff(t *testing.T) {
	var c Config
	ctx, caller := callerContext(t)
	tp, _, span := c.startRequest(ctx, spanAnswer, "s", "c1")
	if span.SpanContext().IsValid() {
		t.Fatal("a span with tracing off")
	}
	if want := "00-" + caller.TraceID().String() + "-" + caller.SpanID().String() + "-01"; tp != want {
		t.Errorf("traceparent %q, want %q", tp, want)
	}
	if tp, ts, _ := c.startRequest(context.Background(), spanAnswer, "s", "c1"); tp != "" || ts != "" {
		t.Errorf("trace context from nowhere: %q %q", tp, ts)
	}
}
