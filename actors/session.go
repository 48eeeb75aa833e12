package actors

import (
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// requestID turns a wire request id into the id cancellations match.
func requestID(s string) uint64 {
	if s == "" {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64() | 1
}

// Ack errors on the wire.
const (
	ackNoPending       = "no_pending"
	ackAlreadyAnswered = "already_answered"
)

// ackError is the wire form of an Answer, ClientResult or EndRun error.
func ackError(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNoPending):
		return ackNoPending
	case errors.Is(err, ErrAlreadyAnswered):
		return ackAlreadyAnswered
	}
	return err.Error()
}

// ackErr turns a wire Ack back into an error.
func ackErr(a *messages.Ack) error {
	switch a.GetError() {
	case "":
		return nil
	case ackNoPending:
		return ErrNoPending
	case ackAlreadyAnswered:
		return ErrAlreadyAnswered
	}
	return errors.New(a.GetError())
}

// queued is a turn or end-run request waiting for the session's current turn.
type queued struct {
	msg    any
	sender *actor.PID
	// wire: the request came as a protobuf message (from a cluster member),
	// so its reply must be one too.
	wire bool
}

// sessionActor serialises one session's turns: one turn at a time, in arrival
// order, and routes confirmations and cancellations to the running turn. It
// owns the session's commit actor. When idle for Config.SessionIdle it asks
// the dispatcher to passivate it.
type sessionActor struct {
	cfg     Config
	session string
	// grain: the actor is a cluster grain of kind "session" (it learns its
	// session from ClusterInit and stops itself when idle).
	grain       bool
	passivating bool // a grain that is stopping: new requests go elsewhere

	commit   *actor.PID
	received uint64 // messages from the dispatcher

	queue   []queued
	current *runningTurn
}

type runningTurn struct {
	id     uint64
	pid    *actor.PID // nil for an end-run or client-result job
	sender *actor.PID
	done   bool // the requester was answered
	// For a job: which kind, and whether its requester wants a wire reply.
	job  string
	wire bool
}

func newSessionActor(cfg Config, session string) *sessionActor {
	return &sessionActor{cfg: cfg, session: session}
}

func (a *sessionActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if a.session != "" {
			a.startCommit(ctx)
		}
		ctx.SetReceiveTimeout(a.cfg.SessionIdle)
	case *dispatchRequest:
		a.received++
		a.queue = append(a.queue, queued{msg: m, sender: ctx.Sender()})
		a.pump(ctx)
	case *endRunRequest, *clientResultRequest:
		a.received++
		a.queue = append(a.queue, queued{msg: m, sender: ctx.Sender()})
		a.pump(ctx)
	case *cluster.ClusterInit:
		// A grain learns its session only now (after Started).
		a.session, a.grain = m.Identity.Identity, true
		a.startCommit(ctx)
	case *messages.DispatchTurn:
		if a.passivating {
			ctx.Respond(&actor.DeadLetterResponse{Target: ctx.Self()})
			return
		}
		a.queue = append(a.queue, queued{msg: &dispatchRequest{id: requestID(m.RequestId), turn: m}, sender: ctx.Sender(), wire: true})
		a.pump(ctx)
	case *messages.CancelTurn:
		a.cancel(ctx, &cancelTurn{session: m.Session, id: requestID(m.RequestId)})
	case *messages.AnswerQuestion:
		err := a.cfg.board.answer(a.session, m.CallId, toolkit.Answer{Text: m.Text, Declined: m.Declined, Origins: m.Origins})
		ctx.Respond(&messages.Ack{Error: ackError(err)})
	case *messages.ClientResult:
		if a.passivating {
			ctx.Respond(&actor.DeadLetterResponse{Target: ctx.Self()})
			return
		}
		a.queue = append(a.queue, queued{msg: &clientResultRequest{session: a.session, callID: m.CallId, content: m.Content, isError: m.IsError}, sender: ctx.Sender(), wire: true})
		a.pump(ctx)
	case *messages.EndRun:
		if a.passivating {
			ctx.Respond(&actor.DeadLetterResponse{Target: ctx.Self()})
			return
		}
		a.queue = append(a.queue, queued{msg: &endRunRequest{session: a.session, run: m.Run}, sender: ctx.Sender(), wire: true})
		a.pump(ctx)
	case *messages.ConfirmReply:
		a.received++
		if a.current == nil || a.current.done {
			ctx.Respond(&messages.ConfirmAck{Status: "not_found"})
			return
		}
		ctx.Forward(a.current.pid)
	case *cancelTurn:
		a.received++
		a.cancel(ctx, m)
	case *turnFinished:
		if a.current != nil && a.current.pid != nil && a.current.pid.Equal(m.pid) {
			a.current = nil
		}
		if m.failed {
			ctx.Send(a.commit, &resetState{})
		}
		a.pump(ctx)
	case *endRunReply:
		a.current = nil
		a.pump(ctx)
	case *actor.ReceiveTimeout:
		if a.current == nil && len(a.queue) == 0 {
			if a.grain {
				// Passivate after whatever is already queued (a user
				// message, unlike Stop, does not overtake them).
				ctx.Send(ctx.Self(), &passivate{})
				return
			}
			ctx.Send(ctx.Parent(), &sessionIdle{received: a.received})
		}
	case *passivate:
		if a.current == nil && len(a.queue) == 0 && !a.passivating {
			// The cluster activates the grain again on the next request,
			// and it reloads from the store. Requests that arrive before
			// the poison pill is handled get a dead-letter answer, which
			// makes the requesting member ask the new activation.
			a.passivating = true
			ctx.Poison(ctx.Self())
		}
	case *actor.Stopping:
		a.failQueued(ctx)
		if a.current != nil && a.current.pid == nil && !a.current.done {
			// An end-run or client result whose store call had not answered.
			a.current.done = true
			a.replyJob(ctx, a.current.sender, a.current.wire, a.current.job, ErrClosed)
		}
	}
}

// passivate asks a grain to stop if it is still idle.
type passivate struct{}

// replyJob answers an end-run or client-result request.
func (a *sessionActor) replyJob(ctx actor.Context, sender *actor.PID, wire bool, job any, err error) {
	switch {
	case wire:
		ctx.Send(sender, &messages.Ack{Error: ackError(err)})
	case job == jobEndRun:
		ctx.Send(sender, &endRunReply{err: err})
	default:
		ctx.Send(sender, &clientResultReply{err: err})
	}
}

// Kinds of jobs a session runs between turns.
const (
	jobEndRun       = "end_run"
	jobClientResult = "client_result"
)

// startCommit spawns the session's commit actor.
func (a *sessionActor) startCommit(ctx actor.Context) {
	cfg, session := a.cfg, a.session
	a.commit = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return newCommitActor(cfg, session)
	}))
}

// cancel cancels the running turn, or drops a queued one with a canceled reply.
func (a *sessionActor) cancel(ctx actor.Context, m *cancelTurn) {
	if a.current != nil && a.current.id == m.id {
		ctx.Send(a.current.pid, m)
		return
	}
	for i, q := range a.queue {
		if r, ok := q.msg.(*dispatchRequest); ok && r.id == m.id {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			ctx.Send(q.sender, &messages.TurnResult{Session: a.session, Run: r.turn.Run,
				Error: "canceled before the turn started; nothing ran"})
			return
		}
	}
}

// pump starts the next queued job when nothing runs.
func (a *sessionActor) pump(ctx actor.Context) {
	if a.current != nil || len(a.queue) == 0 {
		return
	}
	q := a.queue[0]
	a.queue[0] = queued{} // the backing array must not keep the request alive
	a.queue = a.queue[1:]
	if len(a.queue) == 0 {
		a.queue = nil
	}
	switch m := q.msg.(type) {
	case *dispatchRequest:
		cfg, session, commit, sender := a.cfg, a.session, a.commit, q.sender
		pid := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
			return newTurnActor(cfg, session, commit, m, sender)
		}))
		a.current = &runningTurn{id: m.id, pid: pid, sender: sender}
	case *endRunRequest:
		job := &runningTurn{sender: q.sender, wire: q.wire, job: jobEndRun}
		a.current = job
		f := ctx.RequestFuture(a.commit, m, storeTimeout)
		ctx.ReenterAfter(f, func(res any, err error) {
			r, _ := res.(*endRunReply)
			if r == nil {
				r = &endRunReply{err: err}
			}
			if !job.done {
				job.done = true
				a.replyJob(ctx, job.sender, job.wire, job.job, r.err)
			}
			ctx.Send(ctx.Self(), &endRunReply{})
		})
	case *clientResultRequest:
		job := &runningTurn{sender: q.sender, wire: q.wire, job: jobClientResult}
		a.current = job
		f := ctx.RequestFuture(a.commit, m, storeTimeout)
		ctx.ReenterAfter(f, func(res any, err error) {
			r, _ := res.(*clientResultReply)
			if r == nil {
				r = &clientResultReply{err: err}
			}
			if !job.done {
				job.done = true
				a.replyJob(ctx, job.sender, job.wire, job.job, r.err)
			}
			ctx.Send(ctx.Self(), &endRunReply{})
		})
	}
}

// failQueued answers every queued request when the session stops.
func (a *sessionActor) failQueued(ctx actor.Context) {
	for _, q := range a.queue {
		switch m := q.msg.(type) {
		case *dispatchRequest:
			ctx.Send(q.sender, &messages.TurnResult{Session: a.session, Run: m.turn.Run,
				Error: "the dispatcher stopped before the turn started; nothing ran"})
		case *endRunRequest:
			if q.wire {
				ctx.Send(q.sender, &messages.Ack{Error: ErrClosed.Error()})
			} else {
				ctx.Send(q.sender, &endRunReply{err: ErrClosed})
			}
		case *clientResultRequest:
			if q.wire {
				ctx.Send(q.sender, &messages.Ack{Error: ErrClosed.Error()})
			} else {
				ctx.Send(q.sender, &clientResultReply{err: ErrClosed})
			}
		}
	}
	a.queue = nil
}

// HandleFailure makes the session its children's supervisor. A commit actor
// that panics is restarted (it holds only state it reloads from the store)
// and the request it was handling is answered here, once. A turn actor that
// panics is stopped; its Stopping handler answers its requester, once, and
// the intent it may have written resolves its calls when the session's
// state is reloaded.
func (a *sessionActor) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason any, message any) {
	if child.Equal(a.commit) {
		a.cfg.Logger.Error().Str("session", a.session).Interface("reason", reason).Msg("commit actor failed; restarting it")
		answerFailedStoreRequest(sys, message, fmt.Errorf("the session's store writer failed (%v); it was restarted", reason))
		sup.RestartChildren(child)
		return
	}
	a.cfg.Logger.Error().Str("session", a.session).Interface("reason", reason).Msg("turn actor failed; stopping it")
	// The turn's Stopping handler answers its requester, once, and tells
	// the session the turn failed.
	sup.StopChildren(child)
}

// answerFailedStoreRequest answers, once, the request the commit actor was
// handling when it failed, so its requester does not wait for a timeout.
func answerFailedStoreRequest(sys *actor.ActorSystem, message any, err error) {
	env, ok := message.(*actor.MessageEnvelope)
	if !ok || env.Sender == nil {
		return
	}
	var reply any
	switch env.Message.(type) {
	case *prepareTurn:
		reply = &prepared{err: err}
	case *writeIntent, *commitTurn:
		reply = &storeDone{err: err}
	case *endRunRequest:
		reply = &endRunReply{err: err}
	case *clientResultRequest:
		reply = &clientResultReply{err: err}
	default:
		return
	}
	sys.Root.Send(env.Sender, reply)
}
