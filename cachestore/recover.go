package cachestore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Statuses and texts of the tool messages a recovered turn gets for calls
// that pass 1 did not decide.
const (
	// StatusOutcomeUnknown is the status of a call that may have started
	// before the dispatcher stopped.
	StatusOutcomeUnknown = "outcome_unknown"
	// StatusCanceled is the status of a call that had not started when the
	// dispatcher stopped.
	StatusCanceled = "canceled"

	// ContentOutcomeUnknown is the content of an outcome_unknown message.
	ContentOutcomeUnknown = "outcome unknown: the dispatcher stopped while this call was running; " +
		"it may or may not have taken effect. Check its effect before calling it again."
	// ContentCanceled is the content of a canceled message of a recovered turn.
	ContentCanceled = "canceled: the dispatcher stopped before this call started; it did not run."
	// ContentApprovalLost is the content of a call that pass 1 deferred
	// for approval in a turn the dispatcher stopped before committing: its
	// approval was never stored, so nobody can answer it.
	ContentApprovalLost = "skipped: the dispatcher stopped before this call's request for approval was recorded; " +
		"it did not run. Call it again to ask again."
	// contentTaskUnknown is the content of an outcome_unknown message of a
	// call that ran as a task whose outcome was not learned; %q is the
	// task's id.
	contentTaskUnknown = "outcome unknown: the dispatcher stopped while this call ran as task %q of its server, " +
		"and the task's outcome was not learned; it may or may not have taken effect. Check its effect before calling it again."
)

// maxTaskIDText bounds a task id quoted in a message: the id is the
// server's.
const maxTaskIDText = 128

// taskStatuses are the statuses a TaskLookup may settle a call with.
var taskStatuses = map[string]bool{"ok": true, "error": true, "timeout": true, StatusCanceled: true, StatusOutcomeUnknown: true}

// TaskOutcomes is what a TaskLookup learned of one intent's tasks.
type TaskOutcomes struct {
	turn  int64
	tasks []TaskRef
	msgs  map[int]*messages.ToolMessage
}

// matches reports whether o was learned of an intent naming in's turn and
// tasks.
func (o *TaskOutcomes) matches(in *Intent) bool {
	return o != nil && o.turn == in.Turn && slices.EqualFunc(o.tasks, in.Tasks, func(a, b TaskRef) bool {
		return a.Index == b.Index && a.ID == b.ID && a.At.Equal(b.At)
	})
}

// StartedTasks returns the tasks of in's calls that may have started and
// that pass 1 did not decide: the ones a TaskLookup is asked about.
func StartedTasks(in *Intent) []TaskRef {
	if in == nil || len(in.Tasks) == 0 {
		return nil
	}
	var out []TaskRef
	for _, t := range in.Tasks {
		if slices.Contains(in.Started, t.Index) && in.Decided[t.Index] == nil && t.Index < len(in.IDs) {
			out = append(out, t)
		}
	}
	return out
}

// LookUpTasks asks l about the started tasks of in (an intent of session)
// and returns what it learned, for ResolveIntentWith; nil when in names
// no started task or l is nil. l gets a copy of in.
func LookUpTasks(ctx context.Context, l TaskLookup, session string, in *Intent) *TaskOutcomes {
	if l == nil || len(StartedTasks(in)) == 0 {
		return nil
	}
	c := *in
	c.Session = session
	c.Tasks = slices.Clone(in.Tasks)
	c.Started = slices.Clone(in.Started)
	c.Names = slices.Clone(in.Names)
	c.IDs = slices.Clone(in.IDs)
	c.Decided = nil // a lookup has no business with them
	return &TaskOutcomes{turn: in.Turn, tasks: slices.Clone(in.Tasks), msgs: l(ctx, &c)}
}

// ResolveIntentWith is ResolveIntent with what a lookup learned of the
// intent's tasks (nil, or learned of another intent: nothing): each
// started call that ran as a task and that pass 1 did not decide is
// settled with the lookup's message for it (its id, name and role set
// from the intent); one without a message, or with a status a lookup may
// not give, reads outcome_unknown naming its task.
func ResolveIntentWith(in *Intent, at time.Time, o *TaskOutcomes) *messages.TurnRecord {
	rec := resolveIntent(in, at)
	if !o.matches(in) {
		o = nil
	}
	for _, t := range StartedTasks(in) {
		m := rec.ToolMessages[t.Index]
		if o != nil {
			if got := o.msgs[t.Index]; got != nil && taskStatuses[got.Status] {
				got = proto.Clone(got).(*messages.ToolMessage)
				got.Role, got.ToolCallId, got.Name = "tool", m.ToolCallId, m.Name
				rec.ToolMessages[t.Index] = got
				continue
			}
		}
		m.Content = fmt.Sprintf(contentTaskUnknown, messages.ClipText(t.ID, maxTaskIDText))
	}
	return rec
}

// ResolveIntent builds the turn record
// TaskLookup learns the outcomes of the calls of an intent left by a crash
// that ran as tasks of an outside server (Intent.Tasks of started calls
// that pass 1 did not decide): by call index, the message the call is
// settled with (its status ok, error, timeout, canceled or
// outcome_unknown). A call it gives no message for reads outcome_unknown.
// Stores call it before they resolve the intent, outside every
// transaction and lock of theirs, with a copy of the intent; it may take
// as long as the servers need, within its own bound and ctx's.
type TaskLookup func(ctx context.Context, in *Intent) map[int]*messages.ToolMessage

// TaskResolver is a store that resolves intents naming tasks with a
// TaskLookup (Badger, Memory, PostgreSQL and Split over one of them).
// Until SetTaskLookup is called, RecoverAll leaves such an intent in
// place (the servers that know the tasks are not up yet), and LoadSession
// resolves it without asking (the task's call reads outcome_unknown):
// the session's writer cannot wait.
type TaskResolver interface {
	SetTaskLookup(TaskLookup)
}

// ResolveIntent builds the turn record an intent left by a crash becomes:
// one tool message per call id, in call order; a call decided in pass 1 keeps
// its message, a call that may have started reads outcome_unknown (naming
// its task, for a call that ran as one: ResolveIntentWith), and every
// other call reads canceled. at is the record's time. The intent is not
// modified and the record shares no memory with it.
func ResolveIntent(in *Intent, at time.Time) *messages.TurnRecord {
	return ResolveIntentWith(in, at, nil)
}

func resolveIntent(in *Intent, at time.Time) *messages.TurnRecord {
	started := make(map[int]bool, len(in.Started))
	for _, i := range in.Started {
		started[i] = true
	}
	rec := &messages.TurnRecord{
		Turn:         in.Turn,
		Run:          in.Run,
		TurnId:       in.TurnID,
		Provider:     in.Provider,
		CallsHash:    in.CallsHash,
		TimeUnixNano: at.UnixNano(),
		ToolMessages: make([]*messages.ToolMessage, 0, len(in.IDs)),
	}
	if in.Assistant != nil {
		rec.Assistant = proto.Clone(in.Assistant).(*messages.AssistantMessage)
	}
	for i, id := range in.IDs {
		if m := in.Decided[i]; m != nil {
			m = proto.Clone(m).(*messages.ToolMessage)
			if m.Status == StatusAwaitingApproval {
				// Its approval is written with the commit that never came.
				m.Status, m.Content = "skipped", ContentApprovalLost
			}
			rec.ToolMessages = append(rec.ToolMessages, m)
			continue
		}
		var name string
		if i < len(in.Names) {
			name = in.Names[i]
		}
		m := &messages.ToolMessage{Role: "tool", ToolCallId: id, Name: name}
		if started[i] {
			m.Status, m.Content = StatusOutcomeUnknown, ContentOutcomeUnknown
		} else {
			m.Status, m.Content = StatusCanceled, ContentCanceled
		}
		rec.ToolMessages = append(rec.ToolMessages, m)
	}
	return rec
}

// sortedIndexes returns the keys of a decided map in ascending order.
func sortedIndexes(m map[int]*messages.ToolMessage) []int {
	out := make([]int, 0, len(m))
	for i, v := range m {
		if v != nil {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// RecoverSessions resolves the intent records of each session with resolve,
// which reports whether it resolved a turn, and returns how many it
// resolved: the RecoverAll of every store, given the sessions that have
// intents. A session that fails does not stop the others; their errors are
// returned joined. It stops when ctx ends.
func RecoverSessions(ctx context.Context, sessions []string, resolve func(ctx context.Context, session string) (bool, error)) (int, error) {
	n := 0
	var errs []error
	for _, s := range sessions {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("recovering intents: %w", err)
		}
		resolved, err := resolve(ctx, s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if resolved {
			n++
		}
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("recovering intents: %w", errors.Join(errs...))
	}
	return n, nil
}
