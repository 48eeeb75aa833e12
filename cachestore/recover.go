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
)

// ResolveIntent builds the turn record an intent left by a crash becomes:
// one tool message per call id, in call order; a call decided in pass 1 keeps
// its message, a call that may have started reads outcome_unknown, and every
// other call reads canceled. at is the record's time. The intent is not
// modified and the record shares no memory with it.
func ResolveIntent(in *Intent, at time.Time) *messages.TurnRecord {
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
			rec.ToolMessages = append(rec.ToolMessages, proto.Clone(m).(*messages.ToolMessage))
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
