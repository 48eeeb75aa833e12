package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClusterDeferredApprovalAfterFailover: a turn under confirm defer on
// the member owning its session commits its command awaiting_approval;
// the other member lists the approval (GET /v1/pending); the owner is
// SIGKILLed; on the survivor an answer with another hash is refused
// (409), the right one runs the command once and amends its message once,
// a second answer gets 409.
func TestClusterDeferredApprovalAfterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	ws := t.TempDir()
	ms, ports := startCluster(t, 2, ws)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	first, err := postTurn(ctx, ms[0].http, "da", "", commandCall("warm", "true"))
	if err != nil {
		t.Fatal(err)
	}
	victim := ownerOf(t, ports, 2, first.Member)
	survivor := ms[1-victim]
	body := map[string]any{"run": "r", "provider": "claude-code", "auto_load_schemas": true, "approve": "ask", "confirm": "defer",
		"message": map[string]any{"role": "assistant", "tool_calls": []any{commandCall("dcall", "echo dcall >> ran.log")}}}
	code, reply, err := postJSON(ctx, http.DefaultClient, ms[victim].http+"/v1/sessions/da/turns", body)
	if err != nil || code != 200 || !strings.Contains(reply, `"awaiting_approval"`) {
		t.Fatalf("deferred turn: %d %v %s", code, err, reply)
	}

	// Listed on the other member, from the shared store.
	resp, err := http.Get(survivor.http + "/v1/pending")
	if err != nil {
		t.Fatal(err)
	}
	var pending struct {
		Confirmations []struct {
			CallID   string `json:"call_id"`
			ArgsHash string `json:"args_hash"`
			Deferred bool   `json:"deferred"`
		} `json:"confirmations"`
	}
	err = json.NewDecoder(resp.Body).Decode(&pending)
	resp.Body.Close()
	if err != nil || len(pending.Confirmations) != 1 || pending.Confirmations[0].CallID != "dcall" || !pending.Confirmations[0].Deferred {
		t.Fatalf("pending on the other member: %+v %v", pending, err)
	}
	hash := pending.Confirmations[0].ArgsHash

	if err := ms[victim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = ms[victim].cmd.Wait()
	evs := followEvents(t, ctx, http.DefaultClient, survivor.http, "da")
	confirm := func(hash string) (int, string) {
		t.Helper()
		for {
			code, reply, err := postJSON(ctx, http.DefaultClient, survivor.http+"/v1/sessions/da/confirm/dcall",
				map[string]any{"approve": true, "args_hash": hash})
			if err == nil && code < 500 {
				return code, reply
			}
			if ctx.Err() != nil {
				t.Fatalf("no answer from the survivor: %d %v %s\n%s", code, err, reply, survivor.log)
			}
			time.Sleep(50 * time.Millisecond) // the session moves to the survivor
		}
	}
	if code, reply := confirm("0000"); code != http.StatusConflict || !strings.Contains(reply, "mismatch") {
		t.Errorf("an answer with another hash after the failover: %d %s", code, reply)
	}
	if code, reply := confirm(hash); code != http.StatusOK {
		t.Fatalf("the answer on the survivor: %d %s", code, reply)
	}
	for {
		ev := waitEvent(t, ctx, evs, "tool_result")
		if ev["call_id"] == "dcall" {
			if ev["status"] != "ok" {
				t.Errorf("tool_result of the approved call: %v", ev)
			}
			break
		}
	}
	if code, reply := confirm(hash); code != http.StatusConflict || !strings.Contains(reply, "already_answered") {
		t.Errorf("a second answer: %d %s", code, reply)
	}
	if got := storedStatuses(t, survivor.http, "da"); got["dcall"] != "ok" {
		t.Errorf("stored after the answer: %v", got)
	}
	if n := strings.Count(readFile(filepath.Join(ws, "ran.log")), "dcall"); n != 1 {
		t.Errorf("the approved command ran %d times, want once", n)
	}
}
