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
	grain bool

	commit   *actor.PID
	received uint64 // messages from the dispatcher

	queue   []queued
	current *runningTurn
}

type runningTurn struct {
	id     uint64
	pid    *actor.PID
	sender *actor.PID
	done   bool // the turn replied to its requester
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
		a.queue = append(a.queue, queued{msg: &dispatchRequest{id: requestID(m.RequestId), turn: m}, sender: ctx.Sender(), wire: true})
		a.pump(ctx)
	case *messages.CancelTurn:
		a.cancel(ctx, &cancelTurn{session: m.Session, id: requestID(m.RequestId)})
	case *messages.AnswerQuestion:
		err := a.cfg.board.answer(a.session, m.CallId, toolkit.Answer{Text: m.Text, Declined: m.Declined})
		ctx.Respond(&messages.Ack{Error: ackError(err)})
	case *messages.ClientResult:
		a.queue = append(a.queue, queued{msg: &clientResultRequest{session: a.session, callID: m.CallId, content: m.Content, isError: m.IsError}, sender: ctx.Sender(), wire: true})
		a.pump(ctx)
	case *messages.EndRun:
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
		if a.current != nil && a.current.id == m.id {
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
				// Passivate: the cluster activates the grain again on the
				// next request, and it reloads from the store.
				ctx.Stop(ctx.Self())
				return
			}
			ctx.Send(ctx.Parent(), &sessionIdle{received: a.received})
		}
	case *actor.Stopping:
		a.failQueued(ctx)
	}
}

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
		a.current = &runningTurn{}
		sender := q.sender
		wire := q.wire
		f := ctx.RequestFuture(a.commit, m, storeTimeout)
		ctx.ReenterAfter(f, func(res any, err error) {
			r, _ := res.(*endRunReply)
			if r == nil {
				r = &endRunReply{err: err}
			}
			if wire {
				ctx.Send(sender, &messages.Ack{Error: ackError(r.err)})
			} else {
				ctx.Send(sender, r)
			}
			ctx.Send(ctx.Self(), &endRunReply{})
		})
	case *clientResultRequest:
		a.current = &runningTurn{}
		sender := q.sender
		wire := q.wire
		f := ctx.RequestFuture(a.commit, m, storeTimeout)
		ctx.ReenterAfter(f, func(res any, err error) {
			r, _ := res.(*clientResultReply)
			if r == nil {
				r = &clientResultReply{err: err}
			}
			if wire {
				ctx.Send(sender, &messages.Ack{Error: ackError(r.err)})
			} else {
				ctx.Send(sender, r)
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
// that panics is restarted: it holds only state it reloads from the store.
// A turn actor that panics is stopped and its requester answered here, once,
// with an infrastructure error; the intent it may have written resolves its
// calls when the session's state is reloaded.
func (a *sessionActor) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason any, message any) {
	if child.Equal(a.commit) {
		a.cfg.Logger.Error().Str("session", a.session).Interface("reason", reason).Msg("commit actor failed; restarting it")
		answerFailedStoreRequest(sys, message, fmt.Errorf("the session's store writer failed (%v); it was restarted", reason))
		sup.RestartChildren(child)
		return
	}
	a.cfg.Logger.Error().Str("session", a.session).Interface("reason", reason).Msg("turn actor failed; stopping it")
	sup.StopChildren(child)
	if a.current != nil && a.current.pid != nil && a.current.pid.Equal(child) && !a.current.done {
		a.current.done = true
		sys.Root.Send(a.current.sender, &messages.TurnResult{Session: a.session,
			Error: "internal error in the turn; calls that may have started read outcome_unknown"})
		if self, ok := sup.(actor.Context); ok {
			sys.Root.Send(self.Self(), &turnFinished{id: a.current.id, failed: true})
		}
	}
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
