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

// queued is a turn, end-run or client result waiting for the session's
// current turn: a *messages.DispatchTurn, *messages.EndRun or
// *messages.ClientResult.
type queued struct {
	msg    any
	sender *actor.PID
}

// sessionActor serialises one session's turns: one turn at a time, in arrival
// order, and routes confirmations, answers and cancellations to the running
// turn. It speaks the session protocol only (see Router), whoever routes it:
// the dispatcher actor, or a cluster. It owns the session's commit actor.
//
// Spawned by the dispatcher actor, it lives only while its session has
// work: as soon as nothing runs and nothing is queued it tells the
// dispatcher (sessionIdle), which stops it and keeps the commit actor's
// state for the next activation. Hosted by a router, it stops itself when
// idle for Config.SessionIdle, and its state goes with it.
type sessionActor struct {
	cfg     Config
	session string
	// hosted: a router hosts the actor (a cluster grain). It learns its
	// session from its first request and stops itself when idle.
	hosted      bool
	passivating bool // a hosted actor that is stopping: new requests go elsewhere

	state    *sessionState // handed to the commit actor
	commit   *actor.PID
	received uint64 // requests routed to it
	// reported: the dispatcher was told the session is idle after
	// reportedAt requests (an unhosted actor).
	reported   bool
	reportedAt uint64
	// turns is how many turn actors have not terminated yet: the session
	// is idle only when they have, so stopping it never sends a second
	// Stop to a turn that is ending (a dead letter when it has just died).
	turns    int
	resets   int // resetState requests the commit actor has not answered
	stopping bool

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
}

func newSessionActor(cfg Config, session string, st *sessionState) *sessionActor {
	return &sessionActor{cfg: cfg, session: session, state: st}
}

func newHostedSessionActor(cfg Config) *sessionActor {
	return &sessionActor{cfg: cfg, hosted: true, state: &sessionState{}}
}

func (a *sessionActor) Receive(ctx actor.Context) {
	a.receive(ctx)
	if !a.hosted {
		a.reportIdle(ctx)
	}
}

// reportIdle tells the dispatcher actor, once per count of requests
// received, that the session has no work. The dispatcher stops the actor
// only if it has sent no request since (see dispatcherActor.passivate);
// otherwise the request on its way makes the actor report again when it is
// done with it.
func (a *sessionActor) reportIdle(ctx actor.Context) {
	if a.current != nil || len(a.queue) != 0 || a.turns != 0 || a.resets != 0 || a.stopping || (a.reported && a.reportedAt == a.received) {
		return
	}
	switch ctx.Message().(type) {
	case *actor.Started, *actor.Restarting:
		return
	}
	a.reported, a.reportedAt = true, a.received
	// Request, not Send: the dispatcher finds the session by the sender.
	ctx.Request(ctx.Parent(), &sessionIdle{received: a.received})
}

func (a *sessionActor) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if a.session != "" {
			a.startCommit(ctx)
		}
		if a.hosted {
			ctx.SetReceiveTimeout(a.cfg.SessionIdle)
		}
	case *messages.DispatchTurn:
		a.enqueue(ctx, m.Session, m)
	case *messages.EndRun:
		a.enqueue(ctx, m.Session, m)
	case *messages.ClientResult:
		a.cfg.traceDelivery(ctx, "ClientResult", m.Traceparent, m.Tracestate, m.Session, m.CallId, "")
		a.enqueue(ctx, m.Session, m)
	case *messages.CancelTurn:
		a.received++
		a.cfg.traceDelivery(ctx, "CancelTurn", m.Traceparent, m.Tracestate, m.Session, "", "")
		a.cancel(ctx, m)
	case *messages.AnswerQuestion:
		a.received++
		a.learn(ctx, m.Session)
		err := a.cfg.board.answer(a.session, m.CallId, toolkit.Answer{Text: m.Text, Declined: m.Declined, Origins: m.Origins})
		a.cfg.traceDelivery(ctx, "AnswerQuestion", m.Traceparent, m.Tracestate, m.Session, m.CallId, ackError(err))
		ctx.Respond(&messages.Ack{Error: ackError(err)})
	case *messages.ConfirmReply:
		a.received++
		if a.current == nil || a.current.pid == nil {
			a.cfg.traceDelivery(ctx, "ConfirmReply", m.Traceparent, m.Tracestate, m.Session, m.CallId, "not_found")
			ctx.Respond(&messages.ConfirmAck{Status: "not_found"})
			return
		}
		a.cfg.traceDelivery(ctx, "ConfirmReply", m.Traceparent, m.Tracestate, m.Session, m.CallId, "")
		ctx.Forward(a.current.pid)
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
	case *turnFinished:
		if a.current != nil && a.current.pid != nil && a.current.pid.Equal(m.pid) {
			a.current = nil
		}
		if m.failed {
			// Asked, not told: the session is idle only once the reset
			// is applied, so the state kept for the next activation is
			// never the stale one (a Stop would overtake a queued reset).
			a.resets++
			ctx.Request(a.commit, &resetState{})
		}
		a.pump(ctx)
	case *actor.ReceiveTimeout:
		if a.current == nil && len(a.queue) == 0 {
			// Passivate after whatever is already queued (a user
			// message, unlike Stop, does not overtake them).
			ctx.Send(ctx.Self(), &passivate{})
		}
	case *passivate:
		if a.current == nil && len(a.queue) == 0 && !a.passivating {
			// The router activates the session again on the next
			// request, and it reloads from the store. Requests that
			// arrive before the poison pill is handled get a dead-letter
			// answer, which makes the router ask the new activation.
			a.passivating = true
			ctx.Poison(ctx.Self())
		}
	case *stateReset:
		a.resets--
	case *actor.Terminated:
		if !m.Who.Equal(a.commit) {
			a.turns--
		}
	case *actor.Stopping:
		a.stopping = true
		a.failQueued(ctx)
		if j := a.current; j != nil && j.pid == nil && !j.done {
			// An end-run or client result whose store call had not answered.
			j.done = true
			send(ctx, j.sender, &messages.Ack{Error: ackClosed})
		}
	}
}

// send sends a reply to a requester; a request sent without a sender gets
// none.
func send(ctx actor.Context, to *actor.PID, msg any) {
	if to != nil {
		ctx.Send(to, msg)
	}
}

// passivate asks a hosted session actor to stop if it is still idle.
type passivate struct{}

// enqueue queues a turn or job (session names its session).
func (a *sessionActor) enqueue(ctx actor.Context, session string, msg any) {
	a.received++
	if a.passivating {
		ctx.Respond(&actor.DeadLetterResponse{Target: ctx.Self()})
		return
	}
	a.learn(ctx, session)
	a.queue = append(a.queue, queued{msg: msg, sender: ctx.Sender()})
	a.pump(ctx)
}

// learn gives a hosted actor its session, from its first request.
func (a *sessionActor) learn(ctx actor.Context, session string) {
	if a.session == "" && session != "" {
		a.session = session
		a.startCommit(ctx)
	}
}

// startCommit spawns the session's commit actor.
func (a *sessionActor) startCommit(ctx actor.Context) {
	cfg, session, st := a.cfg, a.session, a.state
	a.commit = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return newCommitActor(cfg, session, st)
	}))
}

// cancel cancels the running turn, or drops a queued one with a canceled reply.
func (a *sessionActor) cancel(ctx actor.Context, m *messages.CancelTurn) {
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
		if t, ok := q.msg.(*messages.DispatchTurn); ok && t.RequestId == m.RequestId {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			send(ctx, q.sender, &messages.TurnResult{Session: a.session, Run: t.Run,
				Error: "canceled before the turn started; nothing ran"})
			return
		}
	}
}

// pump starts the next queued job when nothing runs.
func (a *sessionActor) pump(ctx actor.Context) {
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
	case *messages.DispatchTurn:
		cfg, session, commit, sender := a.cfg, a.session, a.commit, q.sender
		tctx, tcancel := context.WithCancel(context.Background())
		// The turn only coordinates (its Receive never blocks), so it
		// runs on the synchronized dispatcher: its start, the commit
		// actor's replies and the pool's poolDone are handled on the
		// sender's goroutine, not one goroutine hand-off each.
		pid := ctx.Spawn(coordinatorProps(func() actor.Actor {
			return newTurnActor(cfg, session, commit, m, sender, tctx, tcancel)
		}))
		a.current = &runningTurn{requestID: m.RequestId, pid: pid, sender: sender, cancel: tcancel}
		a.turns++
	default:
		// The commit actor answers every request, also when a store call
		// panics (see commitActor.Receive): its *messages.Ack comes back
		// here and goes to the requester.
		a.current = &runningTurn{sender: q.sender}
		ctx.Request(a.commit, m)
	}
}

// failQueued answers every queued request when the session stops.
func (a *sessionActor) failQueued(ctx actor.Context) {
	for _, q := range a.queue {
		switch m := q.msg.(type) {
		case *messages.DispatchTurn:
			send(ctx, q.sender, &messages.TurnResult{Session: a.session, Run: m.Run,
				Error: "the dispatcher stopped before the turn started; nothing ran"})
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
func (a *sessionActor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason any, _ any) {
	if child.Equal(a.commit) {
		a.cfg.Logger.Error().Str("session", a.session).Interface("reason", reason).Msg("commit actor failed; restarting it")
		sup.RestartChildren(child)
		return
	}
	a.cfg.Logger.Error().Str("session", a.session).Interface("reason", reason).Msg("turn actor failed; stopping it")
	sup.StopChildren(child)
}
