package actors

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Confirmations of rule 9 (SPEC §3), asked by the preflight actor one at a
// time, in call order, all before pass 2.

// ask puts the call to the Approver, or else to whoever answers tool_confirm
// events with Confirm; the answer comes back as a message. A call whose tool
// previews the files it changes is asked once its preview is computed (off
// the actor's goroutine: it reads files), with the preview.
func (a *preflightActor) ask(ctx actor.Context, p *callPlan) {
	a.asking = p
	a.askedAt = time.Now()
	p.argsHash = p.args.Hash() // only a confirmation names it
	self, sys, idx := ctx.Self(), ctx.ActorSystem(), p.idx
	wait := a.in.cfg.ConfirmTimeout
	if a.in.deferAsk {
		// Nobody is asked now: only the preview is waited for.
		wait = deferPreviewTimeout
	}
	a.askTimer = time.AfterFunc(wait, func() { sys.Root.Send(self, &confirmTimedOut{idx: idx}) })
	if pv := p.tool.Preview; pv != nil {
		pctx, cancel := context.WithTimeout(a.in.turnCtx, wait)
		a.askCancel = cancel
		args := p.args
		go func() {
			m := computePreview(pctx, pv, args, idx)
			if pctx.Err() == nil {
				sys.Root.Send(self, m)
			}
		}()
		return
	}
	a.put(ctx, p, toolkit.Preview{})
}

// previewed asks the pending call with its preview, and binds its approval
// to the state the preview read.
func (a *preflightActor) previewed(ctx actor.Context, m *previewed) {
	p := a.asking
	if p == nil || p.idx != m.idx || p.bound {
		return
	}
	if a.askCancel != nil {
		a.askCancel()
		a.askCancel = nil
	}
	if m.failed != "" {
		a.decideAsk(ctx, false, "", "its preview could not be computed: "+m.failed)
		return
	}
	p.bound, p.boundState = true, m.preview.State
	pv := m.preview
	if note := earlierWriters(a.plans, p); note != "" {
		pv.Note = strings.TrimSpace(pv.Note + "\n" + note)
	}
	if a.in.deferAsk {
		a.deferAsked(ctx, p, shown(pv, a.in.cfg.Redactor))
		return
	}
	a.put(ctx, p, shown(pv, a.in.cfg.Redactor))
}

// put asks for the pending call's approval.
func (a *preflightActor) put(ctx actor.Context, p *callPlan, pv toolkit.Preview) {
	pv.Note = withToolNote(pv.Note, p.tool)
	self, sys := ctx.Self(), ctx.ActorSystem()
	if ap := a.in.cfg.Approver; ap != nil {
		// Off the actor's goroutine: the Approver may block; its answer is
		// piped back and checked against the call id and args hash.
		actx, cancel := context.WithTimeout(a.in.turnCtx, a.in.cfg.ConfirmTimeout-time.Since(a.askedAt))
		a.askCancel = cancel
		req := ApprovalRequest{Session: a.in.em.session, Run: a.in.run, Turn: a.in.turn, CallID: p.id, Tool: p.name,
			Args: slices.Clone(p.args.Canonical), ArgsHash: p.argsHash, Diff: pv.Diff, Note: pv.Note, StateHash: pv.StateHash()}
		go func() {
			if r := askApprover(actx, ap, req); r != nil {
				sys.Root.Send(self, r)
			}
		}()
		return
	}
	a.in.em.emit(&messages.Event{Kind: EventToolConfirm, CallId: p.id, Tool: p.name, ArgsHash: p.argsHash,
		Arguments: a.in.em.clip(string(p.args.Canonical), maxConfirmArguments),
		Text:      fmt.Sprintf("Allow %s to run with these arguments? It is not read-only.", p.name),
		Diff:      pv.Diff, Note: pv.Note, StateHash: pv.StateHash(),
		TurnText: a.turnText(), Upcoming: a.upcoming()})
}

func (a *preflightActor) confirmReply(ctx actor.Context, f *forwardedConfirm) {
	m := f.reply
	switch {
	case a.in.cfg.Approver != nil && !a.answered[m.CallId]:
		// The Approver answers this turn's confirmations, not Confirm.
		answerConfirm(ctx, f, confirmNotFound)
		return
	case a.asking == nil || a.asking.id != m.CallId || (a.asking.tool.Preview != nil && !a.asking.bound):
		// Not asked (yet: a call with a preview is asked once the preview
		// is shown, and an answer before that answers nothing).
		if a.answered[m.CallId] {
			answerConfirm(ctx, f, confirmAlreadyAnswered)
		} else {
			answerConfirm(ctx, f, confirmNotFound)
		}
		return
	case a.asking.argsHash != m.ArgsHash:
		answerConfirm(ctx, f, confirmMismatch)
		return
	}
	answerConfirm(ctx, f, confirmAccepted)
	reason := "denied by the user"
	if m.Reason != "" {
		reason += ": " + messages.ClipText(m.Reason, 500)
	}
	a.decideAsk(ctx, m.Approve, answerStatus(m.Approve), reason)
}

// approverReply settles the pending confirmation with the Approver's
// answer, if it is the answer to that call and those arguments. An answer
// given after the Approver's context ended is never sent: the timer or the
// cancellation settles the call.
func (a *preflightActor) approverReply(ctx actor.Context, m *approverReply) {
	if a.asking == nil || a.asking.id != m.callID || a.asking.argsHash != m.argsHash {
		return
	}
	reason := "denied by the approver"
	if m.reason != "" {
		reason += ": " + messages.ClipText(m.reason, 500)
	}
	a.decideAsk(ctx, m.approve, answerStatus(m.approve), reason)
}

// decideAsk settles the pending confirmation and goes on with the next call.
// A confirmation asked with a tool_confirm event is settled with an
// EventConfirmDecided of status how, in the turn's sequence of events; how
// is "" when no tool_confirm was sent (its preview failed before it was
// asked).
func (a *preflightActor) decideAsk(ctx actor.Context, approved bool, how, reason string) {
	p := a.asking
	a.asking = nil
	if how != "" && a.in.cfg.Approver == nil && a.in.em.active() {
		a.in.em.emit(&messages.Event{Kind: EventConfirmDecided, CallId: p.id, Tool: p.name, Status: how})
	}
	a.in.cfg.Observer.ConfirmWait(p.name, approved, time.Since(a.askedAt))
	if a.answered == nil {
		a.answered = map[string]bool{}
	}
	a.answered[p.id] = true
	a.stopAsking()
	if approved {
		a.mutated(p)
	} else {
		a.skip(p, reason)
	}
	a.cur = nil // its preflight is over
	a.proceed(ctx)
}

// answerStatus is the EventConfirmDecided status of an answer.
func answerStatus(approve bool) string {
	if approve {
		return ConfirmApproved
	}
	return ConfirmDenied
}

// stopAsking stops the confirmation's timer and ends the Approver's
// context of the call that was asked.
func (a *preflightActor) stopAsking() {
	if a.askTimer != nil {
		a.askTimer.Stop()
		a.askTimer = nil
	}
	if a.askCancel != nil {
		a.askCancel()
		a.askCancel = nil
	}
}
