package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// The answer to a deferred approval (ConfirmReply with stored set) is a
// job of its session, queued after the running turn like a client result:
// an approvalActor asks the commit actor to take the approval (claim it
// for an approval, settle it skipped for a denial), answers the requester
// at once, and, when approved and still allowed by the dispatcher's policy
// (shared.answerRefusal), hands the call to a pool actor as one more
// segment of pass 2 — the same call actors, supervision, watchdog,
// counters, spans and events as a turn's calls — and has the commit actor
// settle it with the result. The claim is the call's intent record (the
// pool writes none): if the process dies while the call runs, the
// session's next load settles it outcome_unknown.

// Statuses of a ConfirmAck.
const (
	confirmAccepted        = "accepted"
	confirmNotFound        = "not_found"
	confirmMismatch        = "mismatch"
	confirmAlreadyAnswered = "already_answered"
	confirmClosed          = "closed"
	// confirmFailed: the store failed while the answer was being taken;
	// nothing was taken, the answer may be given again.
	confirmFailed = "failed"
)

// takeApproval asks the commit actor to take a deferred approval for an
// answer: claimed (approve) or settled skipped (deny).
type takeApproval struct{ reply *messages.ConfirmReply }

// approvalTaken is the commit actor's reply to takeApproval: status is a
// ConfirmAck status; approval is the claimed approval (approve), rec the
// amended turn (deny); events is the block the answer's events are
// numbered in (the session's, after its last turn's events).
type approvalTaken struct {
	status   string
	approval *cachestore.Approval
	rec      *messages.TurnRecord
	events   *eventBlock
	err      error
}

// peekApproval asks the commit actor, while a turn runs, whether a stored
// answer has a deferred approval to wait for (it reads the store only:
// the running turn holds the session's state).
type peekApproval struct {
	reply  *messages.ConfirmReply
	sender *actor.PID
}

// approvalPeeked is the reply to peekApproval: status is the answer's
// refusal, or empty when the answer is queued after the running turn.
type approvalPeeked struct {
	reply  *messages.ConfirmReply
	sender *actor.PID
	status string
}

// settleApproval asks the commit actor to amend an approved call's message
// with its result.
type settleApproval struct {
	callID string
	msg    *messages.ToolMessage
}

// approvalSettled is the reply to settleApproval.
type approvalSettled struct {
	rec *messages.TurnRecord
	err error
}

// approvalEmitter stamps the events of an answered approval: its run and
// turn, sequence numbers from the session's block.
func approvalEmitter(cfg *Config, ap *cachestore.Approval, events *eventBlock) *emitter {
	return newEmitter(cfg, ap.Session, ap.Run, ap.Turn, "").numberedIn(events)
}

// emitApprovalResult emits the tool_result of an amended call.
func emitApprovalResult(em *emitter, rec *messages.TurnRecord, callID string) {
	if !em.active() {
		return
	}
	for _, tm := range rec.GetToolMessages() {
		if tm.ToolCallId == callID {
			em.emit(&messages.Event{Kind: EventToolResult, CallId: callID, Tool: tm.Name, Status: tm.Status,
				Text: em.clip(tm.Content, maxEventText), Injected: tm.Injected})
		}
	}
}

// approvalActor carries one answer to a deferred approval through: take
// it, answer the requester, run the call when approved (on a pool of its
// own), settle it, emit its tool_result, and tell its session it is done.
type approvalActor struct {
	cfg     *shared
	session string
	commit  *actor.PID
	reply   *messages.ConfirmReply
	sender  *actor.PID

	acked    bool
	ap       *cachestore.Approval
	em       *emitter
	tr       *turnTrace // nil when tracing is off
	pool     *actor.PID // running the approved call; nil before and without one
	cancel   context.CancelFunc
	finished bool // the call's outcome is recorded; later ones are dropped
}

func (a *approvalActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Request(a.commit, &takeApproval{reply: a.reply})
	case *approvalTaken:
		a.taken(ctx, m)
	case *poolDone:
		a.ran(ctx, m.outcomes[0])
	case *approvalSettled:
		a.settled(ctx, m)
	case *forwardedConfirm:
		// Not a confirmation a turn waits on: the dispatcher asks again
		// with stored set, queued after this job.
		answerConfirm(ctx, m, confirmNotFound)
	case *messages.CancelTurn:
		// The member's grace ended (drainCancel): the approved call is
		// canceled like a turn's, and its result still committed.
		if a.cancel != nil {
			a.cancel()
		}
		if a.pool != nil {
			ctx.Send(a.pool, m)
		}
	case *actor.Stopping:
		a.ack(ctx, confirmClosed)
		if a.cancel != nil {
			a.cancel()
		}
		a.tr.end(&messages.TurnResult{Error: "stopped"})
	}
}

// HandleFailure: a failure of the pool (not of the call, which the pool
// supervises) is a failure of the job; the session, its supervisor, stops
// it.
func (a *approvalActor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, _ *actor.PID, _ *actor.RestartStatistics, reason any, msg any) {
	sup.EscalateFailure(reason, msg)
}

// ack answers the requester once.
func (a *approvalActor) ack(ctx actor.Context, status string) {
	if !a.acked {
		a.acked = true
		send(ctx, a.sender, &messages.ConfirmAck{Status: status})
	}
}

// done tells the session the job is over, answers the requester if it
// has not been (the session first: an answer sent again on reading this
// one finds the job over), and stops.
func (a *approvalActor) done(ctx actor.Context, status string) {
	ctx.Send(ctx.Parent(), &turnFinished{pid: ctx.Self()})
	a.ack(ctx, status)
	ctx.Stop(ctx.Self())
}

func (a *approvalActor) taken(ctx actor.Context, m *approvalTaken) {
	if m.err != nil {
		a.cfg.Logger.Error().Err(m.err).Str("session", a.session).Str("call", a.reply.CallId).Msg("taking a deferred approval failed")
		a.done(ctx, confirmFailed)
		return
	}
	if m.status != confirmAccepted {
		a.done(ctx, m.status)
		return
	}
	a.ap = m.approval
	a.em = approvalEmitter(&a.cfg.Config, a.ap, m.events)
	if m.rec != nil { // denied: settled skipped
		a.cfg.Observer.CallDone(a.ap.Tool, string(toolkit.StatusSkipped))
		emitApprovalResult(a.em, m.rec, a.ap.CallID)
		a.done(ctx, confirmAccepted)
		return
	}
	a.ack(ctx, confirmAccepted)
	a.start(ctx)
}

// plan is the approved call as pass 2 runs it: the turn's only call.
func (a *approvalActor) plan() *callPlan {
	p := &callPlan{id: a.ap.CallID, name: a.ap.Tool, argsHash: a.ap.ArgsHash, dupOf: -1, boundState: a.ap.State}
	if t, ok := a.cfg.Registry.Lookup(a.ap.Tool); ok {
		p.tool = t
		p.bound = t.Preview != nil
	} else {
		p.tool = &toolkit.Tool{Name: a.ap.Tool}
	}
	return p
}

// start hands the approved call to a pool of its own, or settles it at
// once when it may not run.
func (a *approvalActor) start(ctx actor.Context) {
	p := a.plan()
	if reason := a.cfg.answerRefusal(a.ap.Ceiling, a.ap.Tool); reason != "" {
		a.notRun(ctx, toolMsg(p, toolkit.StatusSkipped, skippedText(reason)))
		return
	}
	if p.tool.Handler == nil {
		a.notRun(ctx, toolMsg(p, toolkit.StatusUnknownTool, fmt.Sprintf("%s is no longer available; the approved call did not run.", p.name)))
		return
	}
	args, err := toolkit.ParseArgs(string(a.ap.Arguments), a.cfg.Limits)
	if err != nil || args.Hash() != a.ap.ArgsHash {
		a.notRun(ctx, toolMsg(p, toolkit.StatusError, "the approved arguments could not be read back; the call did not run."))
		return
	}
	p.args = args
	view, err := a.cfg.view(defaultProvider, nil, nil)
	if err != nil {
		a.notRun(ctx, toolMsg(p, toolkit.StatusError, "the tools could not be listed; the call did not run."))
		return
	}
	var member string
	if a.cfg.member {
		member = ctx.ActorSystem().Address()
	}
	a.tr = startTurnTrace(&a.cfg.Config, a.session, a.ap.Run, defaultProvider, &messages.DispatchTurn{
		Traceparent: a.reply.Traceparent, Tracestate: a.reply.Tracestate,
		Message: &messages.AssistantMessage{ToolCalls: []*messages.ToolCall{{Id: p.id}}}}, member)
	a.tr.numbered(a.ap.Turn)
	a.tr.startExecute(1)
	in := &poolInput{cfg: a.cfg, em: a.em, view: view, session: a.session, run: a.ap.Run, turn: a.ap.Turn,
		commit: a.commit, tr: a.tr, log: a.tr.logger(a.cfg.Logger),
		// The call's turn has ended: nobody is waiting on it to answer.
		nobody: true}
	rctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.pool = ctx.Spawn(coordinatorProps(func() actor.Actor { return newPoolActor(in) }))
	// No intent: the claim is the call's intent record.
	ctx.Send(a.pool, &runCalls{ctx: rctx, plans: []*callPlan{p}})
}

// notRun settles an approved call that did not start: its closing events,
// as the pool would emit them, then its commit.
func (a *approvalActor) notRun(ctx actor.Context, m *messages.ToolMessage) {
	var text callText
	a.em.closeCall(&text, m)
	a.ran(ctx, &callOutcome{msg: m})
}

// ran has the call's outcome committed, once, as a turn commits its
// calls: redacted, with its next: line.
func (a *approvalActor) ran(ctx actor.Context, o *callOutcome) {
	if a.finished {
		return
	}
	a.finished = true
	if o == nil {
		o = &callOutcome{msg: toolMsg(a.plan(), toolkit.StatusError, "internal error: the call produced no result")}
	}
	if m := o.msg; m.Injected != "" {
		a.cfg.Observer.Injected(m.Name, m.Injected)
	}
	if r := a.cfg.Redactor; r != nil {
		o.msg.Content = r.Redact(o.msg.Content)
	}
	withNext(o.msg)
	a.tr.startCommit(1)
	ctx.Request(a.commit, &settleApproval{callID: a.ap.CallID, msg: o.msg})
}

func (a *approvalActor) settled(ctx actor.Context, m *approvalSettled) {
	if m.err != nil {
		// The claim stays: the session's next load settles the call
		// outcome_unknown.
		a.cfg.Logger.Error().Err(m.err).Str("session", a.session).Str("call", a.ap.CallID).
			Msg("committing an approved call's result failed; it will read outcome_unknown")
		a.tr.end(&messages.TurnResult{Error: m.err.Error()})
		a.tr = nil
		ctx.Send(ctx.Parent(), &turnFinished{pid: ctx.Self(), failed: true})
		ctx.Stop(ctx.Self())
		return
	}
	for _, tm := range m.rec.GetToolMessages() {
		if tm.ToolCallId == a.ap.CallID {
			a.cfg.Observer.CallDone(a.ap.Tool, tm.Status)
		}
	}
	a.tr.end(&messages.TurnResult{Turn: a.ap.Turn, Messages: []*messages.ToolMessage{{}}})
	a.tr = nil
	emitApprovalResult(a.em, m.rec, a.ap.CallID)
	a.done(ctx, confirmAccepted)
}
