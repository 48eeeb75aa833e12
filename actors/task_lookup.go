package actors

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// TaskResumer learns, after a restart, the outcome of a call that ran as
// the task taskID of an outside server (learned at at) and returns what
// the call's handler would have (mcp.Manager.ResumeTask).
type TaskResumer func(ctx context.Context, taskID string, at time.Time, c *toolkit.Call) (toolkit.Result, error)

// contentTaskNotLearned starts the text of a call whose task's outcome a
// lookup could not learn.
const contentTaskNotLearned = "outcome unknown: the dispatcher stopped while this call ran as a task of its server, " +
	"and the task's outcome could not be learned after the restart; it may or may not have taken effect. " +
	"Check its effect before calling it again. "

// TaskLookup is the store's cachestore.TaskLookup for the calls of an
// interrupted turn that ran as tasks (cachestore.TaskResolver): each
// started call's task is looked up with resume, one at a time in call
// order, and its call settled as pass 2 and 3 settle a call: ok with the
// result's text and media; error or timeout with the next: line; canceled
// when the server cancelled the task; outcome_unknown, saying why, when
// the outcome could not be learned. Texts are redacted with redactor.
// Nobody is asked anything on the call's behalf (a task that needs input
// is declined).
func TaskLookup(resume TaskResumer, redactor toolkit.Redactor, log zerolog.Logger) cachestore.TaskLookup {
	return func(ctx context.Context, in *cachestore.Intent) map[int]*messages.ToolMessage {
		out := map[int]*messages.ToolMessage{}
		for _, t := range cachestore.StartedTasks(in) {
			c := &toolkit.Call{Session: in.Session, Run: in.Run, Turn: in.Turn, ID: in.IDs[t.Index], Name: in.Names[t.Index],
				Emit: func(string) {},
				Ask: func(context.Context, toolkit.Question) (toolkit.Answer, error) {
					return toolkit.Answer{}, toolkit.ErrNobodyToAsk
				},
				Redactor: redactor,
			}
			res, err := resume(ctx, t.ID, t.At, c)
			m := resumedMessage(c, res, err)
			log.Info().Str("session", in.Session).Int64("turn", in.Turn).Str("call", c.ID).Str("tool", c.Name).
				Str("status", m.Status).Msg("settled a call of an interrupted turn with its task's outcome")
			out[t.Index] = m
		}
		return out
	}
}

// resumedMessage is the message of call c whose task's outcome resume
// gave as res and err.
func resumedMessage(c *toolkit.Call, res toolkit.Result, err error) *messages.ToolMessage {
	m := &messages.ToolMessage{Role: "tool", ToolCallId: c.ID, Name: c.Name}
	switch {
	case err == nil:
		m.Status, m.Content = string(toolkit.StatusOK), res.Content
		withParts(m, res.Parts)
		return m
	case errors.Is(err, toolkit.ErrCanceled):
		m.Status, m.Content = string(toolkit.StatusCanceled), "canceled: "+err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		m.Status, m.Content = string(toolkit.StatusTimeout), "timed out: "+err.Error()
	case errors.Is(err, toolkit.ErrOutcomeUnknown), errors.Is(err, context.Canceled):
		m.Status, m.Content = string(toolkit.StatusOutcomeUnknown), contentTaskNotLearned+err.Error()
	default:
		m.Status, m.Content = string(toolkit.StatusError), err.Error()
	}
	m.Content = c.Redact(m.Content)
	withNext(m)
	return m
}
