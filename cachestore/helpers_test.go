package cachestore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Helpers of the package's own tests. The Store contract runs from
// contract_test.go through cachestore/storetest, which holds the same
// helpers exported; these stay for tests that reach inside the stores.

func mustOpenBadger(t testing.TB, opts BadgerOptions) *Badger {
	t.Helper()
	b, err := OpenBadger(opts)
	if err != nil {
		t.Fatalf("OpenBadger: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func record(turn int64, run, turnID string, n int) *messages.TurnRecord {
	rec := &messages.TurnRecord{
		Turn:         turn,
		Run:          run,
		TurnId:       turnID,
		Provider:     "openai",
		TimeUnixNano: 1_700_000_000_000_000_000 + turn,
		Assistant:    &messages.AssistantMessage{Role: "assistant", Content: fmt.Sprintf("turn %d", turn)},
	}
	for i := range n {
		id := fmt.Sprintf("call_%d_%d", turn, i)
		rec.Assistant.ToolCalls = append(rec.Assistant.ToolCalls, &messages.ToolCall{
			Id: id, Type: "function",
			Function: &messages.FunctionCall{Name: "read_files", Arguments: `{"paths":["a.txt"]}`},
		})
		rec.ToolMessages = append(rec.ToolMessages, &messages.ToolMessage{
			Role: "tool", ToolCallId: id, Name: "read_files", Status: "ok",
			Content: fmt.Sprintf("content of turn %d call %d", turn, i),
		})
	}
	return rec
}

func commit(t *testing.T, s Store, session string, rec *messages.TurnRecord) {
	t.Helper()
	if err := s.CommitTurn(context.Background(), &TurnCommit{Session: session, Record: rec}); err != nil {
		t.Fatalf("CommitTurn(%q, %d): %v", session, rec.Turn, err)
	}
}

func turns(t *testing.T, s Store, session string) []*messages.TurnRecord {
	t.Helper()
	got, err := s.Turns(context.Background(), session)
	if err != nil {
		t.Fatalf("Turns(%q): %v", session, err)
	}
	return got
}

func loadSession(t *testing.T, s Store, session string) SessionState {
	t.Helper()
	st, err := s.LoadSession(context.Background(), session)
	if err != nil {
		t.Fatalf("LoadSession(%q): %v", session, err)
	}
	return st
}

var ignoreTime = protocmp.IgnoreFields(&messages.TurnRecord{}, "time_unix_nano")

func diffTurns(want, got []*messages.TurnRecord, opts ...cmp.Option) string {
	return cmp.Diff(want, got, append([]cmp.Option{protocmp.Transform(), cmpopts.EquateEmpty()}, opts...)...)
}

func crashIntent(session string, turn int64) *Intent {
	return &Intent{
		Session:  session,
		Turn:     turn,
		Run:      "r1",
		TurnID:   "tid-crash",
		Provider: "claude-code",
		Assistant: &messages.AssistantMessage{Role: "assistant", ToolCalls: []*messages.ToolCall{
			{Id: "c0", Type: "function", Function: &messages.FunctionCall{Name: "run_command", Arguments: `{"cmd":"make"}`}},
			{Id: "c1", Type: "function", Function: &messages.FunctionCall{Name: "nope", Arguments: `{}`}},
			{Id: "c2", Type: "function", Function: &messages.FunctionCall{Name: "edit_file", Arguments: `{}`}},
			{Id: "c3", Type: "function", Function: &messages.FunctionCall{Name: "read_files", Arguments: `{}`}},
		}},
		Decided: map[int]*messages.ToolMessage{
			1: {Role: "tool", ToolCallId: "c1", Name: "nope", Status: "unknown_tool", Content: "unknown tool nope"},
		},
		Started:   []int{0, 3},
		Names:     []string{"run_command", "nope", "edit_file", "read_files"},
		IDs:       []string{"c0", "c1", "c2", "c3"},
		CallsHash: "hash-of-the-calls",
	}
}

func resolvedCrashIntent(turn int64) *messages.TurnRecord {
	in := crashIntent("", turn)
	return &messages.TurnRecord{
		Turn: turn, Run: "r1", TurnId: "tid-crash", Provider: "claude-code", Assistant: in.Assistant, CallsHash: "hash-of-the-calls",
		ToolMessages: []*messages.ToolMessage{
			{Role: "tool", ToolCallId: "c0", Name: "run_command", Status: "outcome_unknown",
				Content: "outcome unknown: the dispatcher stopped while this call was running; it may or may not have taken effect. Check its effect before calling it again."},
			{Role: "tool", ToolCallId: "c1", Name: "nope", Status: "unknown_tool", Content: "unknown tool nope"},
			{Role: "tool", ToolCallId: "c2", Name: "edit_file", Status: "canceled",
				Content: "canceled: the dispatcher stopped before this call started; it did not run."},
			{Role: "tool", ToolCallId: "c3", Name: "read_files", Status: "outcome_unknown",
				Content: "outcome unknown: the dispatcher stopped while this call was running; it may or may not have taken effect. Check its effect before calling it again."},
		},
	}
}

func loadRun(t *testing.T, s Store, session, run string) *RunState {
	t.Helper()
	rs, err := s.LoadRun(context.Background(), session, run)
	if err != nil {
		t.Fatalf("LoadRun(%q, %q): %v", session, run, err)
	}
	if rs == nil || rs.Dedup == nil || rs.Fetched == nil {
		t.Fatalf("LoadRun(%q, %q) = %#v, want non-nil maps", session, run, rs)
	}
	return rs
}

func cacheGet(t *testing.T, s Store, key string, now time.Time) ([]byte, bool) {
	t.Helper()
	v, ok, err := s.CacheGet(context.Background(), key, now)
	if err != nil {
		t.Fatalf("CacheGet(%q): %v", key, err)
	}
	return v, ok
}
