package service

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/actors"
)

// TestPolicyLoweredIsSaid: a body asking "approve":"all" on a server whose
// ceiling is ask is told so at once: a Tooldispatch-Approve-Lowered header
// on its event stream and on its JSON reply, and a policy_lowered event
// (asked and applied, numbered like every event) first in the turn's
// stream and in the session's; its call that changes things is then asked,
// not run. A body within the ceiling gets neither.
func TestPolicyLoweredIsSaid(t *testing.T) {
	f := newFixture(t, fixtureOpts{approve: actors.ApproveAsk})
	session := f.openSSE("GET", "/v1/sessions/low-s/events", nil, "")
	st := f.openSSE("POST", "/v1/sessions/low-s/turns", turn("r1", "all",
		call(t, "e1", "edit_file", map[string]any{"path": "low.txt", "content": "x"})), "")
	if got := st.resp.Header.Get(ApproveLoweredHeader); got != "all->ask" {
		t.Errorf("the turn's stream has %s %q, want all->ask", ApproveLoweredHeader, got)
	}
	for name, c := range map[string]*sseClient{"turn": st, "session": session} {
		first := c.must()
		var d map[string]any
		if err := json.Unmarshal([]byte(first.Data), &d); err != nil {
			t.Fatalf("%s stream: %v", name, err)
		}
		if first.Event != "policy_lowered" || d["approve_asked"] != "all" || d["approve_applied"] != "ask" || first.ID == "" ||
			!strings.Contains(fmt.Sprint(d["text"]), `asked for approve "all"`) {
			t.Errorf("the %s stream starts with %s id %q %s, want policy_lowered all -> ask, numbered", name, first.Event, first.ID, first.Data)
		}
	}
	asked := st.until("tool_confirm", "e1")
	if resp, body := f.do("POST", "/v1/sessions/low-s/confirm/e1", map[string]any{"approve": false, "args_hash": asked.ArgsHash}); resp.StatusCode != http.StatusOK {
		t.Fatalf("deny: %d %s", resp.StatusCode, body)
	}
	st.until("result", "")

	resp, body := f.do("POST", "/v1/sessions/low-s/turns", turn("r2", "all", call(t, "c1", "calculate", map[string]any{"expression": "1 + 1"})))
	if resp.StatusCode != http.StatusOK || resp.Header.Get(ApproveLoweredHeader) != "all->ask" {
		t.Errorf("a JSON reply: %d, %s %q, want all->ask: %s", resp.StatusCode, ApproveLoweredHeader, resp.Header.Get(ApproveLoweredHeader), body)
	}
	for _, within := range []string{"ask", "none", ""} {
		resp, body = f.do("POST", "/v1/sessions/low-s/turns", turn("r3", within, call(t, "c1", "calculate", map[string]any{"expression": "1 + 1"})))
		if resp.StatusCode != http.StatusOK || resp.Header.Get(ApproveLoweredHeader) != "" {
			t.Errorf("approve %q within the ceiling: %d, %s %q: %s", within, resp.StatusCode, ApproveLoweredHeader, resp.Header.Get(ApproveLoweredHeader), body)
		}
	}
	// Turns 2 to 5 went by on the session's stream: one policy_lowered, turn 2's.
	lowered := 0
	for {
		ev := session.must()
		if ev.Event == "policy_lowered" {
			lowered++
		}
		var d eventData
		ev.decode(t, &d)
		if d.Turn == 5 && ev.Event == "tool_result" {
			break
		}
	}
	if lowered != 1 {
		t.Errorf("%d policy_lowered events for turns 2 to 5, want 1 (turn 2's)", lowered)
	}
}
