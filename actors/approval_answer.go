package actors

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// The answer to a deferred approval (ConfirmReply with stored set) is a
// job of its session, queued after the running turn like a client result:
// an approvalActor asks the commit actor to take the approval (claim it
// for an approval, settle it skipped for a denial), answers the requester
// at once, and, when approved, runs the call as pass 2 would (its timeout,
// the binding to the files its preview read, redaction) and has the
// commit actor settle it with the result. The claim is the call's intent
// record: if the process dies while the call runs, the session's next
// load settles it outcome_unknown.

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

// approvalSeqBase places the events of an answered deferred approval
// after every event of the session's last turn and after client results.
const approvalSeqBase = 700_000_000

// takeApproval asks the commit actor to take a deferred approval for an
// answer: claimed (approve) or settled skipped (deny).
type takeApproval struct{ reply *messages.ConfirmReply }

// approvalTaken is the commit actor's reply to takeApproval: status is a
// ConfirmAck status; approval is the claimed approval (approve), rec the
// amended turn (deny); last is the session's last committed turn.
type approvalTaken struct {
	status   string
	approval *cachestore.Approval
	rec      *messages.TurnRecord
	last     int64
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

// approvalRan is the outcome of an approved call, from its goroutine.
type approvalRan struct{ o *callOutcome }

// approvalOverdue: the approved call outlived its timeout and grace.
type approvalOverdue struct{}

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
	return nil
}

// takeApproval takes the approval a stored ConfirmReply answers.
func (a *commitActor) takeApproval(m *takeApproval) *approvalTaken {
	ctx, cancel := a.storeCtx()
	defer cancel()
	if err := a.loaded(ctx); err != nil {
		return &approvalTaken{err: err}
	}
	r, last := m.reply, a.st.next-1
	if r.Approve {
		ap, err := a.store.ClaimApproval(ctx, a.session, r.CallId, r.ArgsHash)
		if err != nil {
			return &approvalTaken{status: a.refusal(ctx, r.CallId, err), last: last, err: ignoreRefusal(err)}
		}
		return &approvalTaken{status: confirmAccepted, approval: ap, last: last}
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
		return &approvalTaken{status: a.refusal(ctx, r.CallId, cachestore.ErrNotFound), last: last}
	case ap.ArgsHash != r.ArgsHash:
		return &approvalTaken{status: confirmMismatch, last: last}
	case ap.Claimed:
		return &approvalTaken{status: confirmAlreadyAnswered, last: last}
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
		return &approvalTaken{status: a.refusal(ctx, r.CallId, err), last: last, err: ignoreRefusal(err)}
	}
	return &approvalTaken{status: confirmAccepted, approval: ap, rec: rec, last: last}
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
		em := approvalEmitter(&a.cfg.Config, ap, a.st.next-1)
		emitApprovalResult(em, rec, ap.CallID)
	}
	return nil
}

// approvalEmitter stamps the events of an answered approval: its run and
// turn, sequence numbers after the session's last turn's.
func approvalEmitter(cfg *Config, ap *cachestore.Approval, last int64) *emitter {
	em := newEmitter(cfg, ap.Session, ap.Run, ap.Turn, "")
	em.seqBase = uint64(last)*seqPerTurn + approvalSeqBase + uint64(ap.Turn%1000)*100_000 +
		uint64(crc32.ChecksumIEEE([]byte(ap.CallID))%100)*1000
	return em
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
// it, answer the requester, run the call when approved, settle it, emit
// its events, and tell its session it is done.
type approvalActor struct {
	cfg     *shared
	session string
	commit  *actor.PID
	reply   *messages.ConfirmReply
	sender  *actor.PID

	acked    bool
	ap       *cachestore.Approval
	em       *emitter
	text     callText
	cancel   context.CancelFunc
	overdue  *time.Timer
	finished bool // the call's outcome is recorded; later ones are dropped
}

func (a *approvalActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Request(a.commit, &takeApproval{reply: a.reply})
	case *approvalTaken:
		a.taken(ctx, m)
	case *approvalRan:
		a.ran(ctx, m.o)
	case *approvalOverdue:
		p := a.plan()
		a.ran(ctx, &callOutcome{msg: toolMsg(p, toolkit.StatusTimeout, fmt.Sprintf(
			"timed out after %s: the tool did not stop at its timeout and was abandoned", p.tool.EffectiveTimeout()))})
	case *approvalSettled:
		a.settled(ctx, m)
	case *messages.ConfirmReply:
		// Not a confirmation a turn waits on: the dispatcher asks again
		// with stored set, queued after this job.
		ctx.Respond(&messages.ConfirmAck{Status: confirmNotFound})
	case *messages.CancelTurn:
		// The member's grace ended (drainCancel): the approved call is
		// canceled like a turn's, and its result still committed.
		if a.cancel != nil {
			a.cancel()
		}
	case *actor.Stopping:
		a.ack(ctx, confirmClosed)
		if a.overdue != nil {
			a.overdue.Stop()
		}
		if a.cancel != nil {
			a.cancel()
		}
	}
}

// ack answers the requester once.
func (a *approvalActor) ack(ctx actor.Context, status string) {
	if !a.acked {
		a.acked = true
		send(ctx, a.sender, &messages.ConfirmAck{Status: status})
	}
}

// done tells the session the job is over, and stops.
func (a *approvalActor) done(ctx actor.Context) {
	ctx.Send(ctx.Parent(), &turnFinished{pid: ctx.Self()})
	ctx.Stop(ctx.Self())
}

func (a *approvalActor) taken(ctx actor.Context, m *approvalTaken) {
	if m.err != nil {
		a.cfg.Logger.Error().Err(m.err).Str("session", a.session).Str("call", a.reply.CallId).Msg("taking a deferred approval failed")
		a.ack(ctx, confirmFailed)
		a.done(ctx)
		return
	}
	a.ack(ctx, m.status)
	if m.status != confirmAccepted {
		a.done(ctx)
		return
	}
	a.ap = m.approval
	a.em = approvalEmitter(&a.cfg.Config, a.ap, m.last)
	if m.rec != nil { // denied: settled skipped
		a.cfg.Observer.CallDone(a.ap.Tool, string(toolkit.StatusSkipped))
		emitApprovalResult(a.em, m.rec, a.ap.CallID)
		a.done(ctx)
		return
	}
	a.start(ctx)
}

// plan is the approved call as pass 2 runs it.
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

// start runs the approved call off the actor's goroutine.
func (a *approvalActor) start(ctx actor.Context) {
	p := a.plan()
	if reason := a.lowered(); reason != "" {
		a.ran(ctx, &callOutcome{msg: toolMsg(p, toolkit.StatusSkipped, skippedText(reason))})
		return
	}
	if p.tool.Handler == nil {
		a.ran(ctx, &callOutcome{msg: toolMsg(p, toolkit.StatusUnknownTool,
			fmt.Sprintf("%s is no longer available; the approved call did not run.", p.name))})
		return
	}
	args, err := toolkit.ParseArgs(string(a.ap.Arguments), a.cfg.Limits)
	if err != nil || args.Hash() != a.ap.ArgsHash {
		a.ran(ctx, &callOutcome{msg: toolMsg(p, toolkit.StatusError, "the approved arguments could not be read back; the call did not run.")})
		return
	}
	p.args = args
	view, err := a.cfg.view(defaultProvider, nil, nil)
	if err != nil {
		a.ran(ctx, &callOutcome{msg: toolMsg(p, toolkit.StatusError, "the tools could not be listed; the call did not run.")})
		return
	}
	in := &poolInput{cfg: a.cfg, em: a.em, view: view, session: a.session, run: a.ap.Run, turn: a.ap.Turn,
		commit: a.commit, log: a.cfg.Logger}
	rctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.em.call(EventToolCallStart, p.id, p.name)
	self, sys := ctx.Self(), ctx.ActorSystem()
	a.overdue = time.AfterFunc(p.tool.EffectiveTimeout()+a.cfg.WatchdogGrace, func() { sys.Root.Send(self, &approvalOverdue{}) })
	text := &a.text
	go func() {
		sys.Root.Send(self, &approvalRan{o: runApproved(in, rctx, p, text)})
	}()
}

// lowered is why the dispatcher's policy now forbids the approved call,
// empty when it allows it: an approval outlives the process that asked
// it, and an operator who restarted with a lower ceiling (none) or with
// the tool excluded has it skipped, as a turn asking it now would.
func (a *approvalActor) lowered() string {
	if LowerApproval(a.ap.Ceiling, a.cfg.MaxApprove) == ApproveNone {
		return notApprovedText(&a.cfg.Config)
	}
	if slices.Contains(a.cfg.Exclude, a.ap.Tool) {
		return "the operator excluded " + a.ap.Tool + " after the call asked"
	}
	return ""
}

// runApproved runs the call as a call actor would; a panic is its error.
func runApproved(in *poolInput, ctx context.Context, p *callPlan, text *callText) (o *callOutcome) {
	defer func() {
		if r := recover(); r != nil {
			in.log.Error().Str("session", in.session).Str("tool", p.name).Str("call", p.id).Msg("tool panicked")
			o = &callOutcome{msg: toolMsg(p, toolkit.StatusError, fmt.Sprintf("the tool panicked: %v", r))}
		}
	}()
	return (&callActor{in: in, turnCtx: ctx}).run(p, text, nil)
}

// ran records the call's outcome once and has it committed.
func (a *approvalActor) ran(ctx actor.Context, o *callOutcome) {
	if a.finished {
		return
	}
	a.finished = true
	if a.overdue != nil {
		a.overdue.Stop()
	}
	a.em.closeCall(&a.text, o.msg)
	ctx.Request(a.commit, &settleApproval{callID: a.ap.CallID, msg: o.msg})
}

func (a *approvalActor) settled(ctx actor.Context, m *approvalSettled) {
	if m.err != nil {
		// The claim stays: the session's next load settles the call
		// outcome_unknown.
		a.cfg.Logger.Error().Err(m.err).Str("session", a.session).Str("call", a.ap.CallID).
			Msg("committing an approved call's result failed; it will read outcome_unknown")
		ctx.Send(ctx.Parent(), &turnFinished{pid: ctx.Self(), failed: true})
		ctx.Stop(ctx.Self())
		return
	}
	for _, tm := range m.rec.GetToolMessages() {
		if tm.ToolCallId == a.ap.CallID {
			a.cfg.Observer.CallDone(a.ap.Tool, tm.Status)
		}
	}
	emitApprovalResult(a.em, m.rec, a.ap.CallID)
	a.done(ctx)
}
