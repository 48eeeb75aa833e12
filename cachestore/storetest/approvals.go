package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// awaitingTurn is a committed turn of two calls, the second awaiting
// approval, with its approval record.
func awaitingTurn(session string, turn int64) *cachestore.TurnCommit {
	rec := Record(turn, "r", "", 2)
	id := rec.ToolMessages[1].ToolCallId
	rec.ToolMessages[1].Status = cachestore.StatusAwaitingApproval
	rec.ToolMessages[1].Content = "waiting for a person's approval"
	return &cachestore.TurnCommit{Session: session, Record: rec, Approvals: []*cachestore.Approval{{
		Session: session, Run: "r", Turn: turn, CallID: id, Tool: "read_files",
		Arguments: []byte(`{"paths":["a.txt"]}`), ArgsHash: "hash-" + id, State: "state", Shown: `{"paths":["a.txt"]}`, Diff: "--- a\n+++ b\n",
		Ceiling: "ask", Answerer: "confirm", Asked: time.Unix(1_700_000_000, 0).UTC(),
	}}}
}

// testApprovals: a deferred approval is committed with its turn, listed by
// session and for every session across a restart, claimed once with the
// hash it was asked with (another hash changes nothing), and settled once
// by amending its message; a commit whose approval names no call awaiting
// approval is refused whole; a claimed approval whose runner is gone reads
// outcome_unknown once its session is loaded again.
func testApprovals(t *testing.T, open Opener) {
	s, restart := open(t)
	ctx := context.Background()
	c := awaitingTurn("s", 1)
	want := c.Approvals[0]
	if err := s.CommitTurn(ctx, c); err != nil {
		t.Fatalf("CommitTurn with an approval: %v", err)
	}
	bad := awaitingTurn("s", 2)
	bad.Approvals[0].CallID = bad.Record.ToolMessages[0].ToolCallId // an ok call
	if err := s.CommitTurn(ctx, bad); err == nil {
		t.Errorf("CommitTurn with an approval of a call not awaiting approval succeeded")
	}
	if n := len(Turns(t, s, "s")); n != 1 {
		t.Errorf("the refused commit left %d turns, want 1", n)
	}
	if err := s.CommitTurn(ctx, awaitingTurn("other", 1)); err != nil {
		t.Fatalf("CommitTurn of another session: %v", err)
	}

	s = restart()
	for _, session := range []string{"s", ""} {
		got, err := s.Approvals(ctx, session)
		if err != nil {
			t.Fatalf("Approvals(%q): %v", session, err)
		}
		n := 1
		if session == "" {
			n = 2
		}
		if len(got) != n || got[0].Session != "other" && session == "" {
			t.Fatalf("Approvals(%q) after a restart = %d records (first %+v), want %d in session order", session, len(got), first(got), n)
		}
		if session == "s" && !approvalEqual(got[0], want) {
			t.Errorf("Approvals(%q)[0] = %+v, want %+v", session, got[0], want)
		}
	}
	LoadSession(t, s, "s")
	if _, err := s.ClaimApproval(ctx, "s", want.CallID, "another hash"); !errors.Is(err, cachestore.ErrArgsMismatch) {
		t.Errorf("ClaimApproval with another hash = %v, want ErrArgsMismatch", err)
	}
	if _, err := s.ClaimApproval(ctx, "s", "nope", want.ArgsHash); !errors.Is(err, cachestore.ErrNotFound) {
		t.Errorf("ClaimApproval of an unknown call = %v, want ErrNotFound", err)
	}
	claimed, err := s.ClaimApproval(ctx, "s", want.CallID, want.ArgsHash)
	if err != nil || !claimed.Claimed || string(claimed.Arguments) != string(want.Arguments) {
		t.Fatalf("ClaimApproval = %+v, %v, want the approval claimed with its arguments", claimed, err)
	}
	if _, err := s.ClaimApproval(ctx, "s", want.CallID, want.ArgsHash); !errors.Is(err, cachestore.ErrAlreadySettled) {
		t.Errorf("second ClaimApproval = %v, want ErrAlreadySettled", err)
	}
	result := &messages.ToolMessage{Role: "tool", ToolCallId: want.CallID, Status: "ok", Content: "ran after approval"}
	rec, err := s.SettleApproval(ctx, "s", want.CallID, result)
	if err != nil {
		t.Fatalf("SettleApproval: %v", err)
	}
	if m := rec.GetToolMessages()[1]; m.Status != "ok" || m.Name != "read_files" || m.Content != "ran after approval" {
		t.Errorf("SettleApproval returned message %v, want the result named as the call", m)
	}
	if _, err := s.SettleApproval(ctx, "s", want.CallID, result); !errors.Is(err, cachestore.ErrAlreadySettled) {
		t.Errorf("second SettleApproval = %v, want ErrAlreadySettled", err)
	}
	if _, err := s.SettleApproval(ctx, "s", "call_1_0", result); !errors.Is(err, cachestore.ErrAlreadySettled) {
		t.Errorf("SettleApproval of an ok call = %v, want ErrAlreadySettled", err)
	}
	if got, err := s.Approvals(ctx, "s"); err != nil || len(got) != 0 {
		t.Errorf("Approvals after the answer = %d records, %v; want none", len(got), err)
	}

	// A claim whose runner dies: the next load of the session settles it.
	LoadSession(t, s, "other")
	o := awaitingTurn("other", 1).Approvals[0]
	if _, err := s.ClaimApproval(ctx, "other", o.CallID, o.ArgsHash); err != nil {
		t.Fatalf("ClaimApproval in session other: %v", err)
	}
	s = restart()
	LoadSession(t, s, "other")
	if got, err := s.Approvals(ctx, ""); err != nil || len(got) != 0 {
		t.Errorf("Approvals after the claimed one's session was loaded again = %d records, %v; want none", len(got), err)
	}
	turns := Turns(t, s, "other")
	if m := turns[0].GetToolMessages()[1]; m.Status != "outcome_unknown" {
		t.Errorf("a claimed approval whose runner is gone reads %q (%q), want outcome_unknown", m.Status, m.Content)
	}
	turns = Turns(t, s, "s")
	if m := turns[0].GetToolMessages()[1]; m.Status != "ok" || m.Content != "ran after approval" {
		t.Errorf("the settled call reads %q after a restart, want the amended result", m.Status)
	}
}

func first(as []*cachestore.Approval) *cachestore.Approval {
	if len(as) == 0 {
		return nil
	}
	return as[0]
}

func approvalEqual(a, b *cachestore.Approval) bool {
	return a.Session == b.Session && a.Run == b.Run && a.Turn == b.Turn && a.CallID == b.CallID && a.Tool == b.Tool &&
		string(a.Arguments) == string(b.Arguments) && a.ArgsHash == b.ArgsHash && a.State == b.State &&
		a.Diff == b.Diff && a.Shown == b.Shown && a.Note == b.Note && a.Ceiling == b.Ceiling && a.Answerer == b.Answerer &&
		a.Asked.Equal(b.Asked) && a.Claimed == b.Claimed
}

// testApprovalShadowed: a later turn that repeats the call id of a call
// still awaiting approval (a model chooses call ids) does not hide it:
// settling the approval amends the call awaiting approval, not the later
// one, and a second settlement is refused as already settled.
func testApprovalShadowed(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	c := awaitingTurn("s", 1)
	id := c.Approvals[0].CallID
	if err := s.CommitTurn(ctx, c); err != nil {
		t.Fatalf("CommitTurn with an approval: %v", err)
	}
	later := Record(2, "r", "", 1)
	later.ToolMessages[0].ToolCallId, later.Assistant.ToolCalls[0].Id = id, id
	if err := s.CommitTurn(ctx, &cachestore.TurnCommit{Session: "s", Record: later}); err != nil {
		t.Fatalf("CommitTurn of a turn repeating the call id: %v", err)
	}
	m := &messages.ToolMessage{Role: "tool", ToolCallId: id, Name: "read_files", Status: "ok", Content: "approved and ran"}
	rec, err := s.SettleApproval(ctx, "s", id, m)
	if err != nil {
		t.Fatalf("SettleApproval of a call a later turn repeats the id of: %v", err)
	}
	if rec.GetTurn() != 1 {
		t.Errorf("SettleApproval amended turn %d, want 1 (the call awaiting approval)", rec.GetTurn())
	}
	turns := Turns(t, s, "s")
	if got := turns[0].ToolMessages[1]; got.Status != "ok" || got.Content != "approved and ran" {
		t.Errorf("turn 1's call = %s %q, want the settled result", got.Status, got.Content)
	}
	if got := turns[1].ToolMessages[0]; got.Content != "content of turn 2 call 0" {
		t.Errorf("turn 2's call was changed: %q", got.Content)
	}
	if _, err := s.SettleApproval(ctx, "s", id, m); !errors.Is(err, cachestore.ErrAlreadySettled) {
		t.Errorf("a second SettleApproval = %v, want ErrAlreadySettled", err)
	}
}
