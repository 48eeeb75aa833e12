package actors

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

// memFiles is a tiny in-memory "workspace" for the previewing tool below:
// its state is each path's content. Safe for concurrent use.
type memFiles struct {
	mu    sync.Mutex
	files map[string]string
	// gate, when set, holds every preview until it is closed; previewing
	// is told when a preview waits there.
	gate, previewing chan struct{}
}

func (m *memFiles) get(p string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.files[p]
}

func (m *memFiles) set(p, v string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[p] = v
}

// previewingRegistry registers "put", a tool that sets a path's content and
// previews it, and "badpreview", whose preview panics.
func previewingRegistry(m *memFiles, p *probe) *toolkit.Registry {
	reg := testRegistry(p)
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"value":{"type":"string"}},"additionalProperties":false}`)
	state := func(_ context.Context, a toolkit.Args) string {
		return a.String("path") + "\x00" + m.get(a.String("path")) + "\n"
	}
	reg.Register(toolkit.Tool{Name: "put", Description: "Set a path's content.", Schema: schema,
		Paths: func(a toolkit.Args) []string { return []string{a.String("path")} },
		Preview: func(ctx context.Context, a toolkit.Args) toolkit.Preview {
			if m.gate != nil {
				m.previewing <- struct{}{}
				<-m.gate
			}
			return toolkit.Preview{Diff: "-" + m.get(a.String("path")) + "\n+" + a.String("value") + "\n", State: state(ctx, a)}
		},
		FileState: state,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			p.enter(c.ID)
			defer p.leave(c.ID)
			m.set(c.Args.String("path"), c.Args.String("value"))
			return toolkit.Result{Content: "put " + c.Args.String("path")}, nil
		}})
	reg.Register(toolkit.Tool{Name: "badpreview", Description: "Its preview panics.", Schema: schema,
		Preview:   func(context.Context, toolkit.Args) toolkit.Preview { panic("no preview today") },
		FileState: state,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			p.enter(c.ID)
			defer p.leave(c.ID)
			return toolkit.Result{Content: "ran"}, nil
		}})
	return reg
}

// TestApprovalHoldsForThePreviewedState, through the Approver: each request
// carries the preview and the hash of the state it read; an approved call
// runs when its path is as previewed, and is skipped when an earlier call
// of the turn changed it; the preview of the later call says so ahead.
func TestApprovalHoldsForThePreviewedState(t *testing.T) {
	files := &memFiles{files: map[string]string{"a": "1", "b": "1"}}
	var log approverLog
	h := newHarness(t, func(c *Config) {
		c.Registry = previewingRegistry(files, newProbe())
		c.Approver = func(ctx context.Context, r ApprovalRequest) (bool, string) {
			log.add(r)
			return true, ""
		}
	})
	tr := turn("s1", "r1", call("p1", "put", `{"path":"a","value":"2"}`), call("p2", "put", `{"path":"a","value":"3"}`),
		call("p3", "put", `{"path":"b","value":"2"}`))
	tr.Approve = ApproveAsk
	r := h.dispatch(tr)
	if diff := cmp.Diff([]string{"p1=ok", "p2=skipped", "p3=ok"}, statuses(r)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if got := r.Messages[1].Content; !strings.Contains(got, "the file changed after the approval: a is no longer as the preview") || !strings.Contains(got, "\nnext: read a again") {
		t.Errorf("the skipped call's text: %q", got)
	}
	if files.get("a") != "2" || files.get("b") != "2" {
		t.Errorf("files = %v", files.files)
	}
	reqs := log.get()
	if len(reqs) != 3 {
		t.Fatalf("%d approvals asked, want 3", len(reqs))
	}
	want := toolkit.Preview{State: "a\x001\n"}.StateHash()
	if reqs[0].Diff != "-1\n+2\n" || reqs[0].StateHash != want || reqs[0].Note != "" {
		t.Errorf("first request: diff %q note %q state hash %q (want %q)", reqs[0].Diff, reqs[0].Note, reqs[0].StateHash, want)
	}
	if !strings.Contains(reqs[1].Note, "approved calls earlier in this turn may change a before this call runs: p1 (put)") {
		t.Errorf("the second preview does not warn of p1: %q", reqs[1].Note)
	}
	if reqs[2].Note != "" {
		t.Errorf("the third call's path is changed by no earlier call, yet: %q", reqs[2].Note)
	}
}

// TestConfirmEventCarriesThePreview: a tool_confirm of a previewing tool
// carries the diff and the state hash; a preview that panics skips the
// call without asking.
func TestConfirmEventCarriesThePreview(t *testing.T) {
	files := &memFiles{files: map[string]string{"a": "1"}}
	h := newHarness(t, func(c *Config) {
		c.Registry = previewingRegistry(files, newProbe())
	})
	h.mu.Lock()
	h.onEv = func(e *messages.Event) {
		if e.Kind != EventToolConfirm {
			return
		}
		go func() {
			_, _ = h.d.Confirm(context.Background(), &messages.ConfirmReply{Session: e.Session, CallId: e.CallId, ArgsHash: e.ArgsHash, Approve: true})
		}()
	}
	h.mu.Unlock()
	tr := turn("s1", "r1", call("p1", "put", `{"path":"a","value":"2"}`), call("b1", "badpreview", `{"path":"a"}`))
	tr.Approve = ApproveAsk
	r := h.dispatch(tr)
	if diff := cmp.Diff([]string{"p1=ok", "b1=skipped"}, statuses(r)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if got := r.Messages[1].Content; !strings.Contains(got, "its preview could not be computed: no preview today") {
		t.Errorf("the call whose preview panicked: %q", got)
	}
	var confirms []*messages.Event
	h.mu.Lock()
	for _, e := range h.events {
		if e.Kind == EventToolConfirm {
			confirms = append(confirms, e)
		}
	}
	h.mu.Unlock()
	if len(confirms) != 1 {
		t.Fatalf("%d tool_confirm events, want 1 (a call whose preview failed is not asked)", len(confirms))
	}
	if c := confirms[0]; c.Diff != "-1\n+2\n" || c.StateHash != (toolkit.Preview{State: "a\x001\n"}).StateHash() {
		t.Errorf("tool_confirm: diff %q state hash %q", c.Diff, c.StateHash)
	}
}

// TestNoAnswerBeforeThePreview: a confirmation reply that arrives while the
// call's preview is still being computed (nobody has seen it yet) answers
// nothing, even with the right call id and argument hash.
func TestNoAnswerBeforeThePreview(t *testing.T) {
	files := &memFiles{files: map[string]string{"a": "1"}, gate: make(chan struct{}), previewing: make(chan struct{}, 1)}
	h := newHarness(t, func(c *Config) { c.Registry = previewingRegistry(files, newProbe()) })
	confirmed := make(chan struct{})
	h.mu.Lock()
	h.onEv = func(e *messages.Event) {
		if e.Kind == EventToolConfirm {
			go func() {
				defer close(confirmed)
				_, _ = h.d.Confirm(context.Background(), &messages.ConfirmReply{Session: e.Session, CallId: e.CallId, ArgsHash: e.ArgsHash, Approve: false, Reason: "seen and denied"})
			}()
		}
	}
	h.mu.Unlock()
	tr := turn("s1", "r1", call("p1", "put", `{"path":"a","value":"2"}`))
	tr.Approve = ApproveAsk
	done := make(chan *messages.TurnResult, 1)
	go func() { done <- h.dispatch(tr) }()
	<-files.previewing
	args, err := toolkit.ParseArgs(`{"path":"a","value":"2"}`, toolkit.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := h.d.Confirm(context.Background(), &messages.ConfirmReply{Session: "s1", CallId: "p1", ArgsHash: args.Hash(), Approve: true})
	if err != nil || ack.Status != "not_found" {
		t.Errorf("a reply before the preview was shown: %v %v, want not_found", ack, err)
	}
	close(files.gate)
	r := <-done
	<-confirmed
	if diff := cmp.Diff([]string{"p1=skipped"}, statuses(r)); diff != "" || !strings.Contains(r.Messages[0].Content, "seen and denied") {
		t.Errorf("(-want +got):\n%s%s", diff, r.Messages[0].Content)
	}
	if files.get("a") != "1" {
		t.Error("the early approval ran the call")
	}
}

// TestPreviewIsRedactedBeforeItIsCut: a preview shows a file's content, which
// may hold a stored secret's value: the tool_confirm event and the
// Approver's request carry it redacted, redacted whole before a long diff
// is cut, so no part of the value is shown where the cut falls inside it.
func TestPreviewIsRedactedBeforeItIsCut(t *testing.T) {
	const secret = "s3cr3t-VALUE-0123456789"
	// The value straddles the point where a long diff is cut.
	long := strings.Repeat("d", maxPreviewDiff-10) + secret + "\n"
	for _, diff := range []string{"-old\n+token=" + secret + "\n", long} {
		files := &memFiles{files: map[string]string{"a": "1"}}
		var asked []ApprovalRequest
		var mu sync.Mutex
		reg := previewingRegistry(files, newProbe())
		put, _ := reg.Lookup("put")
		leaky := *put
		leaky.Name = "leaky"
		leaky.Preview = func(ctx context.Context, a toolkit.Args) toolkit.Preview {
			return toolkit.Preview{Diff: diff, Note: "the file holds " + secret, State: "a\x001\n"}
		}
		reg.Register(leaky)
		for _, approver := range []bool{false, true} {
			h := newHarness(t, func(c *Config) {
				c.Registry = reg
				c.Redactor = secrets.NewRedactor(map[string]string{"TOKEN": secret})
				if approver {
					c.Approver = func(_ context.Context, r ApprovalRequest) (bool, string) {
						mu.Lock()
						asked = append(asked, r)
						mu.Unlock()
						return false, ""
					}
				}
			})
			h.mu.Lock()
			h.onEv = func(e *messages.Event) {
				if e.Kind == EventToolConfirm {
					go func() {
						_, _ = h.d.Confirm(context.Background(), &messages.ConfirmReply{Session: e.Session, CallId: e.CallId, ArgsHash: e.ArgsHash})
					}()
				}
			}
			h.mu.Unlock()
			tr := turn("s1", "r1", call("l1", "leaky", `{"path":"a","value":"2"}`))
			tr.Approve = ApproveAsk
			h.dispatch(tr)
			var shown []string
			h.mu.Lock()
			for _, e := range h.events {
				if e.Kind == EventToolConfirm {
					shown = append(shown, e.Diff, e.Note)
				}
			}
			h.mu.Unlock()
			mu.Lock()
			for _, r := range asked {
				shown = append(shown, r.Diff, r.Note)
			}
			mu.Unlock()
			if len(shown) != 2 {
				t.Fatalf("approver %v: %d previews shown, want 1", approver, len(shown)/2)
			}
			for _, s := range shown {
				for i := 6; i <= len(secret); i++ {
					if strings.Contains(s, secret[:i]) {
						t.Fatalf("approver %v: a preview shows %q of the secret: %.80q…", approver, secret[:i], s[max(0, strings.Index(s, secret[:6])-20):])
					}
				}
			}
			asked = nil
		}
	}
}
