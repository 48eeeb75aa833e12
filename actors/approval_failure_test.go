package actors

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// countingObserver records what the dispatcher counts of each tool.
type countingObserver struct {
	toolkit.NopObserver
	mu        sync.Mutex
	executed  []string // tool=status
	abandoned []string
	inflight  int
}

func (o *countingObserver) Executed(tool, status string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.executed = append(o.executed, tool+"="+status)
}

func (o *countingObserver) Abandoned(tool string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.abandoned = append(o.abandoned, tool)
}

func (o *countingObserver) InFlight(d int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inflight += d
}

// failureOutcome is what one failing call leaves behind: its committed
// message, what the observer counted, its execute_tool span and its
// events, in order.
type failureOutcome struct {
	status, content string
	executed        []string
	abandoned       []string
	inflight        int
	abandonedTotal  int64
	span            string // name and status attribute of the call's execute_tool span
	events          []string
}

// failingTools are tools that panic, hang (ignore their context) and time
// out (return at their context's end), each changing things (so a
// deferred turn defers them) with a short timeout.
func failingTools(release chan struct{}) *toolkit.Registry {
	reg := toolkit.NewRegistry()
	schema := []byte(`{"type":"object","properties":{"x":{"type":"string"}},"additionalProperties":false}`)
	reg.Register(toolkit.Tool{Name: "boom", Description: "Panics.", Schema: schema, Timeout: time.Second,
		Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) { panic("boom at work") }})
	reg.Register(toolkit.Tool{Name: "hang", Description: "Ignores its context.", Schema: schema, Timeout: 50 * time.Millisecond,
		Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) {
			<-release
			return toolkit.Result{Content: "late"}, nil
		}})
	reg.Register(toolkit.Tool{Name: "slow", Description: "Stops at its timeout.", Schema: schema, Timeout: 50 * time.Millisecond,
		Handler: func(ctx context.Context, _ *toolkit.Call) (toolkit.Result, error) {
			<-ctx.Done()
			return toolkit.Result{}, ctx.Err()
		}})
	return reg
}

// runFailing runs one call of tool, in a turn (approve all) or as an
// approved deferred call, on a dispatcher of its own, and returns what it
// left behind.
func runFailing(t *testing.T, tool string, deferred bool) failureOutcome {
	t.Helper()
	release := make(chan struct{})
	obs := &countingObserver{}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	var mu sync.Mutex
	var events []string
	results := make(chan *messages.Event, 4)
	store := cachestore.NewMemory()
	d, err := New(Config{Registry: failingTools(release), Store: store, MaxConcurrency: 3, WatchdogGrace: 20 * time.Millisecond,
		Observer: obs, Tracer: tp.Tracer("test"),
		Events: func(e *messages.Event) {
			if e.CallId != "c1" {
				return
			}
			mu.Lock()
			events = append(events, e.Kind)
			mu.Unlock()
			if e.Kind == EventToolResult {
				results <- e
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Close(ctx)
	}()
	defer close(release) // before Close: an abandoned call's actor ends with its tool
	total0, _ := AbandonedCalls()
	ctx := context.Background()
	tr := turn("s", "r", call("c1", tool, `{"x":"1"}`))
	if deferred {
		tr.Approve, tr.Confirm = ApproveAsk, ConfirmDefer
	} else {
		tr.Approve = ApproveAll
	}
	r, err := d.Dispatch(ctx, tr)
	if err != nil {
		t.Fatal(err)
	}
	if deferred {
		if r.Messages[0].Status != string(toolkit.StatusAwaitingApproval) {
			t.Fatalf("the deferred call is %s, want awaiting_approval", r.Messages[0].Status)
		}
		as, err := store.Approvals(ctx, "s")
		if err != nil || len(as) != 1 {
			t.Fatalf("approvals %v, %v", as, err)
		}
		<-results // the awaiting_approval result of the turn
		mu.Lock()
		events = nil
		mu.Unlock()
		ack, err := d.Confirm(ctx, &messages.ConfirmReply{Session: "s", CallId: "c1", ArgsHash: as[0].ArgsHash, Approve: true})
		if err != nil || ack.Status != confirmAccepted {
			t.Fatalf("Confirm: %v %v", ack, err)
		}
	}
	select {
	case <-results:
	case <-time.After(20 * time.Second):
		t.Fatal("no tool_result")
	}
	var msg *messages.ToolMessage
	turns, err := store.Turns(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range turns {
		for _, m := range rec.ToolMessages {
			if m.ToolCallId == "c1" {
				msg = m
			}
		}
	}
	total1, _ := AbandonedCalls()
	out := failureOutcome{status: msg.Status, content: msg.Content, abandonedTotal: total1 - total0}
	obs.mu.Lock()
	out.executed, out.abandoned, out.inflight = obs.executed, obs.abandoned, obs.inflight
	obs.mu.Unlock()
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), spanExecuteTool) {
			st := ""
			for _, a := range s.Attributes() {
				if a.Key == attrStatus {
					st = a.Value.AsString()
				}
			}
			out.span = s.Name() + " status=" + st
		}
	}
	mu.Lock()
	// tool_call announces a call in pass 1: an approved call had it in
	// the turn that deferred it.
	out.events = slices.DeleteFunc(slices.Clone(events), func(k string) bool { return k == EventToolCall })
	mu.Unlock()
	return out
}

// TestApprovedCallFailsAsInATurn: a panic, a hang (a tool that ignores its
// context) and a timeout in an approved deferred call are handled (the
// same status and text), counted (executed, abandoned, in flight) and
// traced (an execute_tool span with the status) exactly as the same call
// in a turn, with the same events.
func TestApprovedCallFailsAsInATurn(t *testing.T) {
	for _, tool := range []string{"boom", "hang", "slow"} {
		t.Run(tool, func(t *testing.T) {
			inTurn := runFailing(t, tool, false)
			approved := runFailing(t, tool, true)
			want, got := fmt.Sprintf("%+v", inTurn), fmt.Sprintf("%+v", approved)
			if got != want {
				t.Errorf("approved call:\n got %s\nwant %s (as in a turn)", got, want)
			}
		})
	}
}
