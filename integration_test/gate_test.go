package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
)

// TestGateIntegrity: no payload gets a call that is not read-only past the
// confirm gate under --approve none, and none of them touches the workspace.
func TestGateIntegrity(t *testing.T) {
	cases := []struct {
		name, tool, args string
	}{
		{"plain", "edit_file", `{"path":"pwned.txt","content":"x"}`},
		{"duplicate key hiding the path", "edit_file", `{"path":"ok.txt","path":"pwned.txt","content":"x"}`},
		{"case-variant key", "edit_file", `{"path":"pwned.txt","Path":"ok.txt","content":"x"}`},
		{"extra field claiming read-only", "edit_file", `{"path":"pwned.txt","content":"x","read_only":true}`},
		{"wrapped in run_tool", "run_tool", `{"name":"edit_file","arguments":{"path":"pwned.txt","content":"x"}}`},
		{"wrapped as a string", "run_tool", `{"name":"edit_file","arguments":"{\"path\":\"pwned.txt\",\"content\":\"x\"}"}`},
		{"nested run_tool", "run_tool", `{"name":"run_tool","arguments":{"name":"edit_file","arguments":{"path":"pwned.txt","content":"x"}}}`},
		{"run_tool with a read-only claim", "run_tool", `{"name":"edit_file","arguments":{"path":"pwned.txt","content":"x"},"read_only":true}`},
		{"leaked token in the name", "edit_file<|channel|>commentary", `{"path":"pwned.txt","content":"x"}`},
		{"command", "run_command", `{"argv":["touch","pwned.txt"]}`},
		{"command through run_tool", "run_tool", `{"name":"run_command","arguments":{"argv":["touch","pwned.txt"]}}`},
		{"remove", "remove_file", `{"path":"keep.txt"}`},
	}
	for _, approve := range []string{"none", "ask"} {
		for _, provider := range []string{"claude-code", "openai"} {
			t.Run(approve+"/"+provider, func(t *testing.T) {
				ws := t.TempDir()
				if err := os.WriteFile(filepath.Join(ws, "keep.txt"), []byte("keep"), 0o644); err != nil {
					t.Fatal(err)
				}
				// ask mode: every confirmation is denied.
				answers := make([]bool, 64)
				e := newEnv(t, ws, scenarioConfig{Answers: answers})
				var calls []*messages.ToolCall
				for i, c := range cases {
					calls = append(calls, &messages.ToolCall{Id: "c" + string(rune('a'+i)), Type: "function",
						Function: &messages.FunctionCall{Name: c.tool, Arguments: c.args}})
				}
				// Fetch every schema first so rule 6 does not stop the calls early.
				fetch := &messages.ToolCall{Id: "fetch", Type: "function", Function: &messages.FunctionCall{Name: "find_tools",
					Arguments: `{"query":"select:edit_file,run_command,remove_file"}`}}
				for round := 0; round < 2; round++ {
					msg := &messages.AssistantMessage{Role: "assistant", ToolCalls: calls}
					if round == 0 {
						msg = &messages.AssistantMessage{Role: "assistant", ToolCalls: []*messages.ToolCall{fetch}}
					}
					r := e.dispatch(&messages.DispatchTurn{Session: "golden", Run: "r", Provider: provider, Approve: approve, Message: msg})
					if round == 0 {
						continue
					}
					for i, m := range r.Messages {
						if m.Status == "ok" || m.Status == "client_pending" {
							t.Errorf("%s: status %s: %s", cases[i].name, m.Status, m.Content)
						}
					}
				}
				if _, err := os.Stat(filepath.Join(ws, "pwned.txt")); err == nil {
					t.Fatal("a call past the gate wrote pwned.txt")
				}
				if b, err := os.ReadFile(filepath.Join(ws, "keep.txt")); err != nil || string(b) != "keep" {
					t.Fatalf("keep.txt changed: %q %v", b, err)
				}
			})
		}
	}
}

// TestApprovalNotReused: an approval answers one call id and one argument
// hash, once; an identical call in the next turn is asked about again.
func TestApprovalNotReused(t *testing.T) {
	ws := t.TempDir()
	e := newEnv(t, ws, scenarioConfig{})
	confirms := make(chan *messages.Event, 8)
	e.mu.Lock()
	e.answers = nil
	e.mu.Unlock()
	e.onConfirm = func(ev *messages.Event) { confirms <- ev }

	// Each turn in its own run, so de-duplication does not answer the second.
	turnOf := func(id string) *messages.DispatchTurn {
		return &messages.DispatchTurn{Session: "golden", Run: "run-" + id, Provider: "claude-code", Approve: "ask", AutoLoadSchemas: true,
			Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: []*messages.ToolCall{{Id: id, Type: "function",
				Function: &messages.FunctionCall{Name: "run_command", Arguments: `{"argv":["tee","-a","runs.log"],"stdin":"run\n"}`}}}}}
	}
	ctx := context.Background()
	done := make(chan *messages.TurnResult, 1)
	go func() { done <- e.dispatch(turnOf("first")) }()
	ev := <-confirms
	if ack, _ := e.d.Confirm(ctx, &messages.ConfirmReply{Session: "golden", CallId: "first", ArgsHash: ev.ArgsHash, Approve: true}); ack.Status != "accepted" {
		t.Fatalf("approve: %v", ack)
	}
	if r := <-done; r.Messages[0].Status != "ok" {
		t.Fatalf("approved call: %v", r.Messages[0])
	}
	// The same command under another id (in another run): asked again; the
	// old answer does not count.
	go func() { done <- e.dispatch(turnOf("second")) }()
	ev2 := <-confirms
	if ev2.CallId != "second" {
		t.Fatalf("second confirmation for %q", ev2.CallId)
	}
	if ack, _ := e.d.Confirm(ctx, &messages.ConfirmReply{Session: "golden", CallId: "first", ArgsHash: ev.ArgsHash, Approve: true}); ack.Status == "accepted" {
		t.Fatal("the first call's approval was accepted for the second call")
	}
	if ack, _ := e.d.Confirm(ctx, &messages.ConfirmReply{Session: "golden", CallId: "second", ArgsHash: ev2.ArgsHash, Approve: false}); ack.Status != "accepted" {
		t.Fatalf("deny: %v", ack)
	}
	select {
	case r := <-done:
		if r.Messages[0].Status != "skipped" {
			t.Fatalf("denied call: %v", r.Messages[0])
		}
	case <-time.After(20 * time.Second):
		t.Fatal("turn did not end")
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "runs.log")); string(b) != "run\n" {
		t.Fatalf("runs.log = %q, want one run", b)
	}

}
