package actors

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// scopedTools registers the tools of two MCP-like servers, each a
// de-duplication scope of its own: srv's read (read-only), write (a write,
// de-duplicated), toggle (a write that is never de-duplicated) and other's
// read. Every call's content counts the calls of its tool, so a fresh run
// and a replayed one differ.
func scopedTools(cfg *Config) {
	var n atomic.Int64
	tool := func(name, scope string, readOnly, noDedup bool) toolkit.Tool {
		return toolkit.Tool{Name: name, Description: "A tool of " + scope, Schema: json.RawMessage(objSchema),
			ReadOnly: readOnly, NoDedup: noDedup, DedupScope: scope, Source: toolkit.SourceMCP,
			Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
				return toolkit.Result{Content: name + " #" + string(rune('0'+n.Add(1)))}, nil
			}}
	}
	cfg.Registry.Register(tool("mcp__srv__read", "mcp__srv__", true, false))
	cfg.Registry.Register(tool("mcp__srv__write", "mcp__srv__", false, false))
	cfg.Registry.Register(tool("mcp__srv__toggle", "mcp__srv__", false, true))
	cfg.Registry.Register(tool("mcp__other__read", "mcp__other__", true, false))
}

// TestDedupScopeWritesInvalidateTheirReads: a successful write of a scope
// (an MCP server) drops the de-duplication entries of every tool of that
// scope in the run, across turns and within one turn, and no other
// scope's; a write that is never de-duplicated does so too, and runs again
// when repeated.
func TestDedupScopeWritesInvalidateTheirReads(t *testing.T) {
	h := newHarness(t, scopedTools)
	r := h.dispatch(turn("s1", "r1", call("a1", "mcp__srv__read", `{"x":"1"}`), call("o1", "mcp__other__read", `{"x":"1"}`)))
	if diff := cmp.Diff([]string{"a1=ok", "o1=ok"}, statuses(r)); diff != "" {
		t.Fatalf("first reads (-want +got):\n%s", diff)
	}
	r = h.dispatch(turn("s1", "r1", call("a2", "mcp__srv__read", `{"x":"1"}`), call("o2", "mcp__other__read", `{"x":"1"}`)))
	if diff := cmp.Diff([]string{"a2=deduped", "o2=deduped"}, statuses(r)); diff != "" {
		t.Fatalf("repeated reads (-want +got):\n%s", diff)
	}
	r = h.dispatch(turn("s1", "r1", call("w1", "mcp__srv__write", `{"x":"1"}`)))
	if diff := cmp.Diff([]string{"w1=ok"}, statuses(r)); diff != "" {
		t.Fatalf("write (-want +got):\n%s", diff)
	}
	r = h.dispatch(turn("s1", "r1", call("a3", "mcp__srv__read", `{"x":"1"}`), call("o3", "mcp__other__read", `{"x":"1"}`)))
	if diff := cmp.Diff([]string{"a3=ok", "o3=deduped"}, statuses(r)); diff != "" {
		t.Fatalf("reads after the write (-want +got):\n%s", diff)
	}
	// Within one turn: read, write, read reads twice.
	r = h.dispatch(turn("s1", "r1",
		call("a4", "mcp__srv__read", `{"x":"2"}`),
		call("w2", "mcp__srv__write", `{"x":"2"}`),
		call("a5", "mcp__srv__read", `{"x":"2"}`)))
	if diff := cmp.Diff([]string{"a4=ok", "w2=ok", "a5=ok"}, statuses(r)); diff != "" {
		t.Fatalf("read, write, read in one turn (-want +got):\n%s", diff)
	}
	if r.Messages[0].Content == r.Messages[2].Content {
		t.Errorf("the read after the write replays the first: %q", r.Messages[2].Content)
	}
	// A write that is never de-duplicated invalidates as well, and its
	// repeat runs.
	r = h.dispatch(turn("s1", "r1", call("t1", "mcp__srv__toggle", `{}`)))
	first := r.Messages[0].Content
	r = h.dispatch(turn("s1", "r1", call("a6", "mcp__srv__read", `{"x":"1"}`), call("t2", "mcp__srv__toggle", `{}`)))
	if diff := cmp.Diff([]string{"a6=ok", "t2=ok"}, statuses(r)); diff != "" {
		t.Fatalf("read and toggle after a toggle (-want +got):\n%s", diff)
	}
	if r.Messages[1].Content == first {
		t.Errorf("the second toggle replays the first: %q", first)
	}
}

// TestNoDedupWriteInvalidatesReads: a successful call that is not
// read-only makes stale what it may have changed even when its own tool is
// never de-duplicated (NoDedup): a read of a path after a write that
// declares no paths runs again.
func TestNoDedupWriteInvalidatesReads(t *testing.T) {
	h := newHarness(t, func(cfg *Config) {
		cfg.Registry.Register(toolkit.Tool{Name: "poke", Description: "Changes anything, acts every time.",
			Schema: json.RawMessage(objSchema), NoDedup: true,
			Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
				return toolkit.Result{Content: "poked"}, nil
			}})
	})
	h.dispatch(turn("s1", "r1", call("r1", "read", `{"path":"a.txt"}`)))
	h.dispatch(turn("s1", "r1", call("p1", "poke", `{}`)))
	r := h.dispatch(turn("s1", "r1", call("r2", "read", `{"path":"a.txt"}`)))
	if diff := cmp.Diff([]string{"r2=ok"}, statuses(r)); diff != "" {
		t.Fatalf("read after a NoDedup write (-want +got):\n%s", diff)
	}
}

// TestConfirmNoteIsShown: a tool's ConfirmNote (a trusted MCP server's
// destructiveHint) is in its tool_confirm event's note and in the
// Approver's request.
func TestConfirmNoteIsShown(t *testing.T) {
	const note = `MCP server "fs" (trusted) marks this tool destructive (destructiveHint): it may delete or overwrite data.`
	register := func(cfg *Config) {
		cfg.Registry.Register(toolkit.Tool{Name: "mcp__fs__erase", Description: "Erases.", Schema: json.RawMessage(objSchema),
			ConfirmNote: note, Source: toolkit.SourceMCP,
			Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
				return toolkit.Result{Content: "erased"}, nil
			}})
	}
	h := newHarness(t, register)
	confirms := make(chan *messages.Event, 1)
	h.mu.Lock()
	h.onEv = func(e *messages.Event) {
		if e.Kind == EventToolConfirm {
			confirms <- e
		}
	}
	h.mu.Unlock()
	tr := turn("s1", "r1", call("e1", "mcp__fs__erase", `{"x":"all"}`))
	tr.Approve = ApproveAsk
	done := make(chan *messages.TurnResult, 1)
	go func() { done <- h.dispatch(tr) }()
	e := <-confirms
	if e.Note != note {
		t.Errorf("tool_confirm note = %q, want %q", e.Note, note)
	}
	if _, err := h.d.Confirm(context.Background(), &messages.ConfirmReply{Session: "s1", CallId: "e1", ArgsHash: e.ArgsHash}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"e1=skipped"}, statuses(<-done)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	requests := make(chan ApprovalRequest, 1)
	h2 := newHarness(t, func(cfg *Config) {
		register(cfg)
		cfg.Approver = func(_ context.Context, req ApprovalRequest) (bool, string) {
			requests <- req
			return false, "no"
		}
	})
	tr = turn("s2", "r1", call("e2", "mcp__fs__erase", `{"x":"all"}`))
	tr.Approve = ApproveAsk
	h2.dispatch(tr)
	if req := <-requests; req.Note != note {
		t.Errorf("Approver's note = %q, want %q", req.Note, note)
	}
}
