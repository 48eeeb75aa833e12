package actors

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// approverLog records what an Approver was asked.
type approverLog struct {
	mu   sync.Mutex
	reqs []ApprovalRequest
}

func (l *approverLog) add(r ApprovalRequest) {
	l.mu.Lock()
	l.reqs = append(l.reqs, r)
	l.mu.Unlock()
}

func (l *approverLog) get() []ApprovalRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ApprovalRequest(nil), l.reqs...)
}

func TestApproverDecidesInCallOrder(t *testing.T) {
	var log approverLog
	h := newHarness(t, func(c *Config) {
		c.Approver = func(ctx context.Context, r ApprovalRequest) (bool, string) {
			log.add(r)
			if strings.Contains(string(r.Args), `"x"`) {
				return false, "not x"
			}
			return true, ""
		}
	})
	tr := turn("s1", "r1", call("w1", "write", `{ "path" : "x" }`), call("r1", "read", `{"path":"x"}`), call("w2", "write", `{"path":"y"}`))
	tr.Approve = ApproveAsk
	r := h.dispatch(tr)
	if diff := cmp.Diff([]string{"w1=skipped", "r1=ok", "w2=ok"}, statuses(r)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if !strings.Contains(r.Messages[0].Content, "denied by the approver: not x") {
		t.Errorf("denied call's text: %s", r.Messages[0].Content)
	}
	if h.p.count("w1") != 0 {
		t.Error("denied call ran")
	}
	reqs := log.get()
	if len(reqs) != 2 {
		t.Fatalf("approver asked %d times, want 2 (read-only calls are not asked)", len(reqs))
	}
	args, _ := toolkit.ParseArgs(`{"path":"x"}`, toolkit.Limits{})
	want := ApprovalRequest{Session: "s1", Run: "r1", Turn: 1, CallID: "w1", Tool: "write", Args: args.Canonical, ArgsHash: args.Hash()}
	if diff := cmp.Diff(want, reqs[0]); diff != "" {
		t.Errorf("first request (-want +got):\n%s", diff)
	}
	if reqs[1].CallID != "w2" {
		t.Errorf("second request for %s", reqs[1].CallID)
	}
	if k := h.eventKinds("w1"); contains(k, EventToolConfirm) {
		t.Errorf("tool_confirm sent although an Approver answers: %v", k)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestApproverWithinPolicyCeiling(t *testing.T) {
	for _, tc := range []struct {
		name, approve, ceiling string
		want                   string
	}{
		{"turn none", ApproveNone, "", "w1=skipped"},
		{"turn all", ApproveAll, "", "w1=ok"},
		{"ceiling none lowers ask", ApproveAsk, ApproveNone, "w1=skipped"},
		{"ceiling none lowers all", ApproveAll, ApproveNone, "w1=skipped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log approverLog
			h := newHarness(t, func(c *Config) {
				c.MaxApprove = tc.ceiling
				c.Approver = func(ctx context.Context, r ApprovalRequest) (bool, string) {
					log.add(r)
					return true, ""
				}
			})
			tr := turn("s1", "r1", call("w1", "write", `{"path":"x"}`))
			tr.Approve = tc.approve
			if diff := cmp.Diff([]string{tc.want}, statuses(h.dispatch(tr))); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			if n := len(log.get()); n != 0 {
				t.Fatalf("approver asked %d times; approve %q under ceiling %q never asks", n, tc.approve, tc.ceiling)
			}
		})
	}
}

func TestApproverWithoutEvents(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Events = nil
		c.Approver = func(context.Context, ApprovalRequest) (bool, string) { return true, "" }
	})
	tr := turn("s1", "r1", call("w1", "write", `{"path":"x"}`))
	tr.Approve = ApproveAsk
	if diff := cmp.Diff([]string{"w1=ok"}, statuses(h.dispatch(tr))); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestApproverTimeoutCancelAndPanic(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		// The approver answers "yes" right after its context ends: too late.
		// (Not on synctest's clock: a turn whose calls are all skipped can
		// leave a dead letter, whose throttle goroutine outlives a bubble.)
		ended := make(chan error, 1)
		h := newHarness(t, func(c *Config) {
			c.ConfirmTimeout = 20 * time.Millisecond // only how soon the test ends depends on it
			c.Approver = func(ctx context.Context, r ApprovalRequest) (bool, string) {
				<-ctx.Done()
				ended <- ctx.Err()
				return true, "too late"
			}
		})
		tr := turn("s1", "r1", call("w1", "write", `{"path":"x"}`))
		tr.Approve = ApproveAsk
		r := h.dispatch(tr)
		if diff := cmp.Diff([]string{"w1=skipped"}, statuses(r)); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
		if !strings.Contains(r.Messages[0].Content, "no answer within 20ms") {
			t.Errorf("text: %s", r.Messages[0].Content)
		}
		if err := <-ended; err == nil {
			t.Error("the approver's context did not end")
		}
		if h.p.count("w1") != 0 {
			t.Error("a call approved after its timeout ran")
		}
	})
	t.Run("cancel", func(t *testing.T) {
		asked := make(chan struct{})
		ended := make(chan struct{})
		h := newHarness(t, func(c *Config) {
			c.Approver = func(ctx context.Context, r ApprovalRequest) (bool, string) {
				close(asked)
				<-ctx.Done()
				close(ended)
				return true, ""
			}
		})
		tr := turn("s1", "r1", call("w1", "write", `{"path":"x"}`))
		tr.Approve = ApproveAsk
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan *messages.TurnResult, 1)
		go func() {
			r, err := h.d.Dispatch(ctx, tr)
			if err != nil {
				t.Errorf("dispatch: %v", err)
			}
			done <- r
		}()
		<-asked
		cancel()
		r := <-done
		<-ended
		if r == nil {
			return
		}
		if diff := cmp.Diff([]string{"w1=skipped"}, statuses(r)); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
	})
	t.Run("panic", func(t *testing.T) {
		h := newHarness(t, func(c *Config) {
			c.Approver = func(context.Context, ApprovalRequest) (bool, string) { panic("approver bug") }
		})
		tr := turn("s1", "r1", call("w1", "write", `{"path":"x"}`), call("r1", "read", `{"path":"y"}`))
		tr.Approve = ApproveAsk
		r := h.dispatch(tr)
		if diff := cmp.Diff([]string{"w1=skipped", "r1=ok"}, statuses(r)); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
		if !strings.Contains(r.Messages[0].Content, "the approver failed") {
			t.Errorf("text: %s", r.Messages[0].Content)
		}
	})
}

func TestConfirmNotUsedWithApprover(t *testing.T) {
	asked := make(chan ApprovalRequest, 1)
	release := make(chan struct{})
	h := newHarness(t, func(c *Config) {
		c.Approver = func(ctx context.Context, r ApprovalRequest) (bool, string) {
			asked <- r
			<-release
			return false, "the approver said no"
		}
	})
	tr := turn("s1", "r1", call("w1", "write", `{"path":"x"}`))
	tr.Approve = ApproveAsk
	done := make(chan *messages.TurnResult, 1)
	go func() { done <- h.dispatch(tr) }()
	req := <-asked
	ack, err := h.d.Confirm(context.Background(), &messages.ConfirmReply{Session: "s1", CallId: "w1", ArgsHash: req.ArgsHash, Approve: true})
	if err != nil || ack.Status != "not_found" {
		t.Fatalf("Confirm while an Approver answers: %v %v", ack, err)
	}
	close(release)
	r := <-done
	if diff := cmp.Diff([]string{"w1=skipped"}, statuses(r)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}
