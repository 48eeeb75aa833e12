package actors

import (
	"context"
	"errors"
	"testing"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// TestPrepareOnceAndTaken: Prepare refuses bad client tools and chaos
// policies as bad requests (a collision also as toolkit.ErrToolCollision);
// a prepared turn is one request, run once and only by the dispatcher that
// prepared it, and the caller's turn is not changed.
func TestPrepareOnceAndTaken(t *testing.T) {
	h := newHarness(t, nil)
	bad := turn("s1", "r1")
	bad.Provider = "openai"
	bad.ClientTools = []*messages.ToolSpec{{Name: toolkit.FindToolsName}}
	if _, err := h.d.Prepare(bad); !errors.Is(err, ErrBadRequest) || !errors.Is(err, toolkit.ErrToolCollision) {
		t.Fatalf("colliding client tool: %v", err)
	}
	badChaos := turn("s1", "r1")
	badChaos.Chaos = `{"seed":1,"rules":[{"tools":["*"],"faults":[{"kind":"melt","probability":0.5}]}]}`
	if _, err := h.d.Prepare(badChaos); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("bad chaos policy: %v", err)
	}

	tr := turn("s1", "r1", call("a", "lookup", `{}`))
	tr.ClientTools = []*messages.ToolSpec{{Name: "lookup", Parameters: `{"type":"object"}`}}
	p, err := h.d.Prepare(tr)
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.d.DispatchPrepared(context.Background(), p)
	if err != nil || r.Messages[0].Status != string(toolkit.StatusClientPending) {
		t.Fatalf("prepared turn: %v, %v", r, err)
	}
	if tr.RequestId != "" {
		t.Errorf("the caller's turn was changed: request id %q", tr.RequestId)
	}
	if p.RequestID() == "" || p.Turn().RequestId != p.RequestID() {
		t.Errorf("request id %q, the request's %q", p.RequestID(), p.Turn().RequestId)
	}
	if _, err := h.d.DispatchPrepared(context.Background(), p); !errors.Is(err, ErrBadRequest) {
		t.Errorf("a prepared turn ran twice: %v", err)
	}
	other := newHarness(t, nil)
	if _, err := other.d.DispatchPrepared(context.Background(), p); !errors.Is(err, ErrBadRequest) {
		t.Errorf("another dispatcher ran the prepared turn: %v", err)
	}
}
