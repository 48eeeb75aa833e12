package actors

import (
	"context"
	"errors"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// The commit actor's side of deferred approvals: loading the session
// before an answer, taking an approval (claim or deny), looking one up
// while a turn runs, settling the approved call's result, and settling a
// run's waiting approvals when it ends. Every one is a store call of the
// session, so the session's single writer makes it.

// loaded loads the session's state if it is not: LoadSession also
// settles the claimed approvals whose runner is gone.
func (a *commitActor) loaded(ctx context.Context) error {
	st := a.st
	if st.lent {
		a.reset()
	}
	if st.loaded {
		return nil
	}
	l, err := a.store.LoadSession(ctx, a.session)
	if err != nil {
		return err
	}
	st.next, st.loaded, st.fresh, st.runs = l.NextTurn, true, l.NextTurn == 1, runTable{}
	// LoadSession took two blocks: events before the first turn are
	// numbered in the first, the first turn takes the second.
	st.events, st.nextBlock = newEventBlock(l.EventBlock), l.EventBlock+1
	return nil
}

// takeApproval takes the approval a stored ConfirmReply answers.
func (a *commitActor) takeApproval(m *takeApproval) *approvalTaken {
	ctx, cancel := a.storeCtx()
	defer cancel()
	if err := a.loaded(ctx); err != nil {
		return &approvalTaken{err: err}
	}
	r, events := m.reply, a.st.events
	if r.Approve {
		ap, err := a.store.ClaimApproval(ctx, a.session, r.CallId, r.ArgsHash)
		if err != nil {
			return &approvalTaken{status: a.refusal(ctx, r.CallId, err), events: events, err: ignoreRefusal(err)}
		}
		return &approvalTaken{status: confirmAccepted, approval: ap, events: events}
	}
	as, err := a.store.Approvals(ctx, a.session)
	if err != nil {
		return &approvalTaken{err: err}
	}
	var ap *cachestore.Approval
	for _, x := range as {
		if x.CallID == r.CallId {
			ap = x
		}
	}
	switch {
	case ap == nil:
		return &approvalTaken{status: a.refusal(ctx, r.CallId, cachestore.ErrNotFound), events: events}
	case ap.ArgsHash != r.ArgsHash:
		return &approvalTaken{status: confirmMismatch, events: events}
	case ap.Claimed:
		return &approvalTaken{status: confirmAlreadyAnswered, events: events}
	}
	reason := "denied by the user"
	if r.Reason != "" {
		reason += ": " + messages.ClipText(r.Reason, 500)
	}
	msg := &messages.ToolMessage{Role: "tool", ToolCallId: r.CallId, Status: string(toolkit.StatusSkipped), Content: skippedText(reason)}
	if a.cfg.Redactor != nil {
		msg.Content = a.cfg.Redactor.Redact(msg.Content)
	}
	rec, err := a.store.SettleApproval(ctx, a.session, r.CallId, msg)
	if err != nil {
		return &approvalTaken{status: a.refusal(ctx, r.CallId, err), events: events, err: ignoreRefusal(err)}
	}
	return &approvalTaken{status: confirmAccepted, approval: ap, rec: rec, events: events}
}

// peekApproval looks for the approval a stored answer names.
func (a *commitActor) peekApproval(m *peekApproval) *approvalPeeked {
	ctx, cancel := a.storeCtx()
	defer cancel()
	out := &approvalPeeked{reply: m.reply, sender: m.sender}
	as, err := a.store.Approvals(ctx, a.session)
	if err != nil {
		return out // the job reports the store's failure
	}
	for _, ap := range as {
		if ap.CallID != m.reply.CallId {
			continue
		}
		switch {
		case ap.ArgsHash != m.reply.ArgsHash:
			out.status = confirmMismatch
		case ap.Claimed:
			out.status = confirmAlreadyAnswered
		}
		return out
	}
	out.status = a.refusal(ctx, m.reply.CallId, cachestore.ErrNotFound)
	return out
}

// refusal is the ConfirmAck status of a store's refusal to take an
// approval: an approval that is gone was answered when its call is
// committed settled, and never existed otherwise.
func (a *commitActor) refusal(ctx context.Context, callID string, err error) string {
	switch {
	case errors.Is(err, cachestore.ErrArgsMismatch):
		return confirmMismatch
	case errors.Is(err, cachestore.ErrAlreadySettled):
		return confirmAlreadyAnswered
	case errors.Is(err, cachestore.ErrNotFound):
		// A probe that changes nothing (no status is pending): it tells
		// a committed call from an unknown one.
		_, perr := a.store.AmendToolMessage(ctx, a.session, callID, nil, &messages.ToolMessage{})
		if errors.Is(perr, cachestore.ErrAlreadySettled) {
			return confirmAlreadyAnswered
		}
		return confirmNotFound
	}
	return ""
}

// ignoreRefusal drops the errors refusal turns into a status.
func ignoreRefusal(err error) error {
	if errors.Is(err, cachestore.ErrArgsMismatch) || errors.Is(err, cachestore.ErrAlreadySettled) || errors.Is(err, cachestore.ErrNotFound) {
		return nil
	}
	return err
}

// settleApproval amends an approved call's message with its result.
func (a *commitActor) settleApproval(m *settleApproval) *approvalSettled {
	ctx, cancel := a.storeCtx()
	defer cancel()
	rec, err := a.store.SettleApproval(ctx, a.session, m.callID, m.msg)
	return &approvalSettled{rec: rec, err: err}
}

// endRunApprovals settles the deferred approvals of a run that ends
// skipped (an answer afterwards is refused as already answered) and emits
// their tool_result events.
func (a *commitActor) endRunApprovals(ctx context.Context, run string) error {
	if err := a.loaded(ctx); err != nil {
		return err
	}
	as, err := a.store.Approvals(ctx, a.session)
	if err != nil {
		return err
	}
	for _, ap := range as {
		if ap.Run != run || ap.Claimed {
			continue
		}
		msg := &messages.ToolMessage{Role: "tool", ToolCallId: ap.CallID, Status: string(toolkit.StatusSkipped),
			Content: skippedText("the run ended before anyone answered its request for approval")}
		rec, err := a.store.SettleApproval(ctx, a.session, ap.CallID, msg)
		if errors.Is(err, cachestore.ErrAlreadySettled) || errors.Is(err, cachestore.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		a.cfg.Observer.CallDone(ap.Tool, msg.Status)
		em := approvalEmitter(&a.cfg.Config, ap, a.st.events)
		emitApprovalResult(em, rec, ap.CallID)
	}
	return nil
}
