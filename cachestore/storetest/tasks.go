package storetest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// taskNoted is when TaskIntent's tasks were learned: nanoseconds that a
// codec rounding to microseconds or milliseconds would lose.
var taskNoted = time.Unix(1_767_000_000, 123_456_789)

// TaskIntent is an intent of a 6-call turn of one MCP tool: calls 0–4 may
// have started, call 5 had not. Calls 0, 1, 2 and 3 ran as tasks t0–t3;
// call 4 started without a task; call 5 names task t5 but never started.
func TaskIntent(session string, turn int64) *cachestore.Intent {
	const tool = "mcp__jobs__job"
	in := &cachestore.Intent{Session: session, Turn: turn, Run: "r1", TurnID: "tid-tasks", Provider: "claude-code",
		Assistant: &messages.AssistantMessage{Role: "assistant"}, Started: []int{0, 1, 2, 3, 4}}
	for i := range 6 {
		id := "k" + string(rune('0'+i))
		in.IDs = append(in.IDs, id)
		in.Names = append(in.Names, tool)
		in.Assistant.ToolCalls = append(in.Assistant.ToolCalls, &messages.ToolCall{Id: id, Type: "function",
			Function: &messages.FunctionCall{Name: tool, Arguments: `{}`}})
	}
	for _, i := range []int{0, 1, 2, 3, 5} {
		in.Tasks = append(in.Tasks, cachestore.TaskRef{Index: i, ID: "t" + string(rune('0'+i)), At: taskNoted.Add(time.Duration(i))})
	}
	return in
}

// taskOutcomes is what a lookup learns of TaskIntent's tasks: t0
// completed, t1 failed, t2 cancelled, t3 unknown to the server (no
// message); the lookup also offers messages for calls 4 and 5, which
// named no started task and must not take them.
func taskOutcomes() map[int]*messages.ToolMessage {
	return map[int]*messages.ToolMessage{
		0: {Status: "ok", Content: "report: tides"},
		1: {Status: "error", Content: "the job failed"},
		2: {Status: "canceled", Content: "the server cancelled the task"},
		4: {Status: "ok", Content: "forged for a call without a task"},
		5: {Status: "ok", Content: "forged for a call that never started"},
	}
}

// recordingLookup answers with taskOutcomes and records the intents it
// was asked about.
type recordingLookup struct {
	mu    sync.Mutex
	asked []*cachestore.Intent
}

func (l *recordingLookup) lookup(_ context.Context, in *cachestore.Intent) map[int]*messages.ToolMessage {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = append(l.asked, in)
	return taskOutcomes()
}

func (l *recordingLookup) intents() []*cachestore.Intent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*cachestore.Intent(nil), l.asked...)
}

// resolvedTaskTurn is the turn TaskIntent resolves to with taskOutcomes.
func resolvedTaskTurn(turn int64) []*messages.ToolMessage {
	in := TaskIntent("", turn)
	unknown := func(i int) *messages.ToolMessage {
		return &messages.ToolMessage{Role: "tool", ToolCallId: in.IDs[i], Name: in.Names[i], Status: "outcome_unknown"}
	}
	out := []*messages.ToolMessage{
		{Role: "tool", ToolCallId: "k0", Name: in.Names[0], Status: "ok", Content: "report: tides"},
		{Role: "tool", ToolCallId: "k1", Name: in.Names[1], Status: "error", Content: "the job failed"},
		{Role: "tool", ToolCallId: "k2", Name: in.Names[2], Status: "canceled", Content: "the server cancelled the task"},
		unknown(3), unknown(4),
		{Role: "tool", ToolCallId: "k5", Name: in.Names[5], Status: "canceled", Content: cachestore.ContentCanceled},
	}
	return out
}

// testIntentTasks: the task ids of an intent (Intent.Tasks) survive the
// store's codec and a restart; an intent naming a started call's task is
// left in place by a RecoverAll without a TaskLookup, resolved with the
// lookup's outcomes once one is set (RecoverAll, LoadSession), and
// resolved outcome_unknown, naming the task, by a LoadSession without
// one. A lookup's message settles only a started call that ran as a task.
func testIntentTasks(t *testing.T, open Opener) {
	s, restart := open(t)
	ctx := context.Background()
	if _, ok := s.(cachestore.TaskResolver); !ok {
		t.Skip("the store does not implement cachestore.TaskResolver")
	}
	// A LoadSession without a lookup cannot wait: outcome_unknown, naming
	// the task so that a person can look.
	if err := s.WriteIntent(ctx, TaskIntent("blind", 1)); err != nil {
		t.Fatalf("WriteIntent: %v", err)
	}
	LoadSession(t, s, "blind")
	blind := Turns(t, s, "blind")
	if len(blind) != 1 {
		t.Fatalf("session blind: %d turns after LoadSession, want 1", len(blind))
	}
	if m := blind[0].ToolMessages[0]; m.Status != "outcome_unknown" || !strings.Contains(m.Content, `"t0"`) {
		t.Errorf("call k0 resolved without a lookup = %s %q; want outcome_unknown naming task \"t0\"", m.Status, m.Content)
	}

	Commit(t, s, "s", Record(1, "r1", "", 1))
	in := TaskIntent("s", 2)
	if err := s.WriteIntent(ctx, in); err != nil {
		t.Fatalf("WriteIntent: %v", err)
	}
	in.Tasks[0].ID = "changed by the caller" // the store keeps its own copy
	s = restart()
	if got := len(Turns(t, s, "s")); got != 1 {
		t.Fatalf("session s has %d turns after a restart without a lookup, want 1 (the intent naming tasks left for the lookup)", got)
	}
	l := &recordingLookup{}
	s.(cachestore.TaskResolver).SetTaskLookup(l.lookup)
	if n, err := s.RecoverAll(ctx); err != nil || n != 1 {
		t.Errorf("RecoverAll with a lookup = %d, %v; want 1, nil", n, err)
	}
	checkTaskTurn(t, s, "s", 2, l)

	// LoadSession asks the lookup too.
	l2 := &recordingLookup{}
	s.(cachestore.TaskResolver).SetTaskLookup(l2.lookup)
	if err := s.WriteIntent(ctx, TaskIntent("l", 1)); err != nil {
		t.Fatalf("WriteIntent: %v", err)
	}
	if st := LoadSession(t, s, "l"); st.NextTurn != 2 {
		t.Errorf("NextTurn after LoadSession = %d, want 2", st.NextTurn)
	}
	checkTaskTurn(t, s, "l", 1, l2)
	if n, err := s.RecoverAll(ctx); err != nil || n != 0 {
		t.Errorf("RecoverAll after everything was resolved = %d, %v; want 0, nil", n, err)
	}
	if got := len(l.intents()) + len(l2.intents()); got != 2 {
		t.Errorf("the lookups were asked %d times, want 2 (once per intent)", got)
	}
}

// checkTaskTurn checks that turn of session resolved TaskIntent with
// taskOutcomes, and that l was asked about the intent as written.
func checkTaskTurn(t *testing.T, s cachestore.Store, session string, turn int64, l *recordingLookup) {
	t.Helper()
	asked := l.intents()
	if len(asked) != 1 {
		t.Fatalf("session %s: the lookup was asked %d times, want once", session, len(asked))
	}
	want := TaskIntent(session, turn).Tasks
	if diff := cmp.Diff(want, asked[0].Tasks, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("session %s: the tasks the lookup was given (-want +got):\n%s", session, diff)
	}
	if asked[0].Session != session || asked[0].Turn != turn {
		t.Errorf("the lookup was given session %q turn %d, want %q %d", asked[0].Session, asked[0].Turn, session, turn)
	}
	ts := Turns(t, s, session)
	if len(ts) == 0 || ts[len(ts)-1].Turn != turn {
		t.Fatalf("session %s: turn %d was not resolved (%d turns)", session, turn, len(ts))
	}
	got := ts[len(ts)-1].ToolMessages
	ignore := protocmp.IgnoreFields(&messages.ToolMessage{}, "content")
	if diff := cmp.Diff(resolvedTaskTurn(turn), got, protocmp.Transform(), ignore); diff != "" {
		t.Errorf("session %s: resolved messages (-want +got):\n%s", session, diff)
	}
	for i, m := range resolvedTaskTurn(turn) {
		if i >= len(got) {
			break
		}
		switch {
		case m.Status == "outcome_unknown" && i == 3:
			if !strings.Contains(got[i].Content, `"t3"`) {
				t.Errorf("call k3 (a task the lookup did not know) = %q; want its text to name task \"t3\"", got[i].Content)
			}
		case m.Status == "outcome_unknown":
			if got[i].Content != cachestore.ContentOutcomeUnknown {
				t.Errorf("call %s = %q; want the plain outcome_unknown text", m.ToolCallId, got[i].Content)
			}
		case got[i].Content != m.Content:
			t.Errorf("call %s content = %q, want %q", m.ToolCallId, got[i].Content, m.Content)
		}
	}
}
