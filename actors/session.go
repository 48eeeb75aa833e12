package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Ack errors of the session protocol.
const (
	ackNoPending       = "no_pending"
	ackAlreadyAnswered = "already_answered"
	ackClosed          = "closed"
	// ackInvalidAnswer starts the Ack error of an ErrInvalidAnswer; the
	// reason follows ": ".
	ackInvalidAnswer = "invalid_answer"
)

// ackError is the Ack form of an AnswerQuestion, ClientResult or EndRun error.
func ackError(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNoPending):
		return ackNoPending
	case errors.Is(err, ErrAlreadyAnswered):
		return ackAlreadyAnswered
	case errors.Is(err, ErrClosed):
		return ackClosed
	case errors.Is(err, ErrInvalidAnswer):
		return ackInvalidAnswer + ": " + strings.TrimPrefix(err.Error(), ErrInvalidAnswer.Error()+": ")
	}
	return err.Error()
}

// ackErr turns an Ack back into an error.
func ackErr(a *messages.Ack) error {
	switch a.GetError() {
	case "":
		return nil
	case ackNoPending:
		return ErrNoPending
	case ackAlreadyAnswered:
		return ErrAlreadyAnswered
	case ackClosed:
		return ErrClosed
	}
	if why, ok := strings.CutPrefix(a.GetError(), ackInvalidAnswer+": "); ok {
		return fmt.Errorf("%w: %s", ErrInvalidAnswer, why)
	}
	return errors.New(a.GetError())
}

// queued is a turn or job waiting for the session's current turn: a
// *Prepared, *messages.EndRun or *messages.ClientResult.
type queued struct {
	msg    any
	sender *actor.PID
}

// session is what a session actor does whichever lifecycle it has: it
// serialises one session's turns (one turn at a time, in arrival order),
// routes confirmations, answers and cancellations to the running turn,
// and owns the session's commit actor. It speaks the session protocol
// only (see Router), whoever routes it.
//
// Two actors embed it, one per lifecycle: childSession, spawned by the
// dispatcher actor for as long as the session has work, and hostedSession,
// a cluster's grain, which learns its session from its first request and
// stops itself when idle.
type session struct {
	cfg    *shared
	id     string
	commit *actor.PID
	// turns is how many turn actors have not terminated yet: the session
	// is idle only when they have, so stopping it never sends a second
	// Stop to a turn that is ending (a dead letter when it has just died).
	turns    int
	resets   int // resetState requests the commit actor has not answered
	stopping bool
	confirms uint64 // confirmations forwarded, numbering forwardedConfirm

	queue   []queued
	current *runningTurn
}

// runningTurn is the session's current turn or job (end-run, client result).
type runningTurn struct {
	requestID string     // of a turn, for cancellations
	pid       *actor.PID // the turn actor; nil for a job
	sender    *actor.PID
	done      bool               // a job's requester was answered
	cancel    context.CancelFunc // ends the turn's context; nil for a job
	// confirms are the requesters of the confirmations handed to the turn
	// actor and not answered yet, by forwardedConfirm.seq.
	confirms map[uint64]*actor.PID
}

// forwardedConfirm is a confirmation the session hands to its running
// turn or answer job; the answer (confirmAnswered) comes back to the
// session, which answers the requester. A turn that ends first never
// answers (a message that reaches a stopped actor's mailbox is dropped
// without a reply): the session answers what it did not with not_found
// when the turn finishes, and the dispatcher then asks the session's
// store (a deferred approval).
type forwardedConfirm struct {
	seq   uint64
	reply *messages.ConfirmReply
}

// confirmAnswered is a turn's answer to a forwardedConfirm.
type confirmAnswered struct {
	seq uint64
	ack *messages.ConfirmAck
}

// answerConfirm answers a forwardedConfirm.
func answerConfirm(ctx actor.Context, m *forwardedConfirm, status string) {
	ctx.Respond(&confirmAnswered{seq: m.seq, ack: &messages.ConfirmAck{Status: status}})
}

// receive handles the messages both lifecycles handle alike.
func (a *session) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.CancelTurn:
		a.cfg.traceDelivery(ctx, "CancelTurn", m.Traceparent, m.Tracestate, m.Session, "", "")
		a.cancel(ctx, m)
	case *messages.ConfirmReply:
		if m.Stored {
			a.cfg.traceDelivery(ctx, "ConfirmReply", m.Traceparent, m.Tracestate, m.Session, m.CallId, "")
			if a.current == nil {
				a.enqueue(ctx, m)
				return
			}
			// A turn runs: the answer waits for it only if there is a
			// deferred approval to answer; the commit actor looks.
			ctx.Request(a.commit, &peekApproval{reply: m, sender: ctx.Sender()})
			return
		}
		if a.current == nil || a.current.pid == nil {
			a.cfg.traceDelivery(ctx, "ConfirmReply", m.Traceparent, m.Tracestate, m.Session, m.CallId, "not_found")
			ctx.Respond(&messages.ConfirmAck{Status: "not_found"})
			return
		}
		a.cfg.traceDelivery(ctx, "ConfirmReply", m.Traceparent, m.Tracestate, m.Session, m.CallId, "")
		a.forwardConfirm(ctx, m)
	case *confirmAnswered:
		if j := a.current; j != nil {
			if to, ok := j.confirms[m.seq]; ok {
				delete(j.confirms, m.seq)
				send(ctx, to, m.ack)
			}
		}
	case *messages.Ack:
		// The commit actor answered the current job.
		if j := a.current; j != nil && j.pid == nil {
			if !j.done {
				j.done = true
				send(ctx, j.sender, m)
			}
			a.current = nil
		}
		a.pump(ctx)
	case *approvalPeeked:
		if m.status != "" {
			send(ctx, m.sender, &messages.ConfirmAck{Status: m.status})
			return
		}
		a.queue = append(a.queue, queued{msg: m.reply, sender: m.sender})
		a.pump(ctx)
	case *turnFinished:
		a.turnFinished(ctx, m)
	case *stateReset:
		a.resets--
	case *actor.Terminated:
		if !m.Who.Equal(a.commit) {
			a.turns--
		}
	case *actor.Stopping:
		a.stopping = true
		a.failQueued(ctx)
		if j := a.current; j != nil {
			j.answerConfirms(ctx, confirmClosed)
		}
		if j := a.current; j != nil && j.pid == nil && !j.done {
			// An end-run or client result whose store call had not answered.
			j.done = true
			send(ctx, j.sender, &messages.Ack{Error: ackClosed})
		}
	}
}

// arrive returns what the session queues for a turn or job that reached
// it: a *messages.DispatchTurn (from another member, or sent to the
// dispatcher actor as a message) is prepared here, once, and answered at
// once when it cannot be; a *Prepared (from this process) is taken as it
// is.
func (a *session) arrive(ctx actor.Context, msg any) (any, bool) {
	switch m := msg.(type) {
	case *messages.DispatchTurn:
		p, err := prepare(a.cfg, m, Policy{}, "")
		if err != nil {
			ctx.Respond(&messages.TurnResult{Session: m.GetSession(), Run: m.GetRun(), Error: err.Error()})
			return nil, false
		}
		return p, true
	case *messages.ClientResult:
		a.cfg.traceDelivery(ctx, "ClientResult", m.Traceparent, m.Tracestate, m.Session, m.CallId, "")
	}
	return msg, true
}

// answer hands an answer to the question a running tool waits on.
func (a *session) answer(ctx actor.Context, m *messages.AnswerQuestion) {
	err := a.cfg.board.answer(a.id, m.CallId, toolkit.Answer{Text: m.Text, Declined: m.Declined, Origins: m.Origins})
	a.cfg.traceDelivery(ctx, "AnswerQuestion", m.Traceparent, m.Tracestate, m.Session, m.CallId, ackError(err))
	ctx.Respond(&messages.Ack{Error: ackError(err)})
}

// forwardConfirm hands a confirmation to the running turn or answer job,
// keeping its requester until the turn answers or finishes.
func (a *session) forwardConfirm(ctx actor.Context, m *messages.ConfirmReply) {
	j := a.current
	a.confirms++
	if j.confirms == nil {
		j.confirms = map[uint64]*actor.PID{}
	}
	j.confirms[a.confirms] = ctx.Sender()
	ctx.Request(j.pid, &forwardedConfirm{seq: a.confirms, reply: m})
}

// answerConfirms answers every confirmation the turn did not.
func (j *runningTurn) answerConfirms(ctx actor.Context, status string) {
	for seq, to := range j.confirms {
		send(ctx, to, &messages.ConfirmAck{Status: status})
		delete(j.confirms, seq)
	}
}

// turnFinished: the current turn answered its requester. A confirmation
// it was handed and did not answer finds no call waiting in it: not_found,
// and the dispatcher asks the store.
func (a *session) turnFinished(ctx actor.Context, m *turnFinished) {
	if a.current != nil && a.current.pid != nil && a.current.pid.Equal(m.pid) {
		a.current.answerConfirms(ctx, confirmNotFound)
		a.current = nil
	}
	if m.failed {
		// Asked, not told: the session is idle only once the reset is
		// applied, so the state kept for the next activation is never
		// the stale one (a Stop would overtake a queued reset).
		a.resets++
		ctx.Request(a.commit, &resetState{})
	}
	a.pump(ctx)
}

// send sends a reply to a requester; a request sent without a sender gets
// none.
func send(ctx actor.Context, to *actor.PID, msg any) {
	if to != nil {
		ctx.Send(to, msg)
	}
}

// enqueue queues a turn or job (what arrive returned) and starts it when
// nothing runs.
func (a *session) enqueue(ctx actor.Context, msg any) {
	a.queue = append(a.queue, queued{msg: msg, sender: ctx.Sender()})
	a.pump(ctx)
}

// startCommit spawns the session's commit actor and hands it st, the
// session's state: the session keeps no reference to it.
func (a *session) startCommit(ctx actor.Context, st *sessionState) {
	cfg, id := a.cfg, a.id
	a.commit = ctx.Spawn(cfg.props(func() actor.Actor {
		return newCommitActor(cfg, id, st)
	}))
}

// cancel cancels the running turn, or drops a queued one with a canceled reply.
func (a *session) cancel(ctx actor.Context, m *messages.CancelTurn) {
	if m.RequestId == "" {
		return
	}
	if a.current != nil && a.current.pid != nil && a.current.requestID == m.RequestId {
		// The turn's context ends at once: pass 1 runs inside the turn's
		// Receive and reads the mailbox only when it is done, but it
		// watches the context (pattern matching stops). The message then
		// settles what waits for it (a confirmation, the pool).
		a.current.cancel()
		ctx.Send(a.current.pid, m)
		return
	}
	for i, q := range a.queue {
		if p, ok := q.msg.(*Prepared); ok && p.RequestID() == m.RequestId {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			send(ctx, q.sender, &messages.TurnResult{Session: a.id, Run: p.turn.Run,
				Error: "canceled before the turn started; nothing ran"})
			return
		}
	}
}

// pump starts the next queued job when nothing runs.
func (a *session) pump(ctx actor.Context) {
	if a.current != nil || len(a.queue) == 0 || a.commit == nil {
		return
	}
	q := a.queue[0]
	a.queue[0] = queued{} // the backing array must not keep the request alive
	a.queue = a.queue[1:]
	if len(a.queue) == 0 {
		a.queue = nil
	}
	switch m := q.msg.(type) {
	case *messages.ConfirmReply:
		// An answer to a deferred approval: a job that may run a call, so
		// an actor of its own, like a turn.
		cfg, id, commit, sender := a.cfg, a.id, a.commit, q.sender
		pid := ctx.Spawn(cfg.props(func() actor.Actor {
			return &approvalActor{cfg: cfg, session: id, commit: commit, reply: m, sender: sender}
		}))
		a.current = &runningTurn{pid: pid, sender: sender, cancel: func() {}}
		a.turns++
	case *Prepared:
		cfg, id, commit, sender := a.cfg, a.id, a.commit, q.sender
		tctx, tcancel := context.WithCancel(context.Background())
		// The turn has a mailbox goroutine of its own: pass 1 runs in
		// its Receive, and on the synchronized dispatcher it ran on
		// whichever goroutine held the turn's mailbox when the commit
		// actor's reply came, at times this one (while the turn's start
		// was still being handled here), which then took no cancellation
		// until pass 1 was over.
		pid := ctx.Spawn(cfg.props(func() actor.Actor {
			return newTurnActor(cfg, id, commit, m, sender, tctx, tcancel)
		}))
		a.current = &runningTurn{requestID: m.RequestID(), pid: pid, sender: sender, cancel: tcancel}
		a.turns++
	default:
		// The commit actor answers every request, also when a store call
		// panics (see commitActor.Receive): its *messages.Ack comes back
		// here and goes to the requester.
		a.current = &runningTurn{sender: q.sender}
		ctx.Request(a.commit, m)
	}
}

// busy reports whether the session has a turn or job running or queued.
func (a *session) busy() bool {
	return a.current != nil || len(a.queue) != 0
}

// failQueued answers every queued request when the session stops.
func (a *session) failQueued(ctx actor.Context) {
	for _, q := range a.queue {
		switch m := q.msg.(type) {
		case *Prepared:
			send(ctx, q.sender, &messages.TurnResult{Session: a.id, Run: m.turn.Run,
				Error: "the dispatcher stopped before the turn started; nothing ran"})
		case *messages.ConfirmReply:
			send(ctx, q.sender, &messages.ConfirmAck{Status: confirmClosed})
		default:
			send(ctx, q.sender, &messages.Ack{Error: ackClosed})
		}
	}
	a.queue = nil
}

// HandleFailure makes the session its children's supervisor.
//
// A turn actor that panics is stopped; its Stopping handler answers its
// requester, once, and tells the session the turn failed; the intent it
// may have written resolves its calls when the session's state is
// reloaded.
//
// The commit actor recovers from a panic itself and answers the request it
// was handling (see commitActor.Receive), so a panic that reaches here is
// one outside any request (while it starts): it is restarted, and holds
// only state it reloads from the store.
func (a *session) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason any, _ any) {
	if child.Equal(a.commit) {
		a.cfg.Logger.Error().Str("session", a.id).Interface("reason", reason).Msg("commit actor failed; restarting it")
		sup.RestartChildren(child)
		return
	}
	a.cfg.Logger.Error().Str("session", a.id).Interface("reason", reason).Msg("turn actor failed; stopping it")
	sup.StopChildren(child)
}
