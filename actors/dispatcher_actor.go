package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/messages"
)

// envelope is a message held for a session that is stopping.
type envelope struct {
	msg    any
	sender *actor.PID
}

type sessionEntry struct {
	pid       *actor.PID
	forwarded uint64 // messages sent to this incarnation
	stopping  bool
	held      []envelope // messages that arrived while stopping
}

// dispatcherActor routes each request to its session's actor, creating it on
// demand and passivating it when it reports idle.
type dispatcherActor struct {
	cfg      Config
	sessions map[string]*sessionEntry // by session id
	byPID    map[string]string        // session actor id -> session id
}

func newDispatcherActor(cfg Config) *dispatcherActor {
	return &dispatcherActor{cfg: cfg, sessions: map[string]*sessionEntry{}, byPID: map[string]string{}}
}

// Supervision: a session actor that panics is stopped (the default strategy
// would restart it with its in-memory state lost mid-turn); its turn already
// answered or answers through its own Stopping handler, and the next request
// for the session starts a fresh actor that reloads from the store.
var sessionSupervisor = actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })

func (a *dispatcherActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.DispatchTurn:
		if err := checkTurn(m); err != nil {
			ctx.Respond(&messages.TurnResult{Session: m.GetSession(), Error: err.Error()})
			return
		}
		a.route(ctx, m.Session, m, true)
	case *messages.ConfirmReply:
		if !a.route(ctx, m.Session, m, false) {
			ctx.Respond(&messages.ConfirmAck{Status: "not_found"})
		}
	case *messages.CancelTurn:
		a.route(ctx, m.Session, m, false)
	case *messages.AnswerQuestion:
		// A question is asked by a running turn, so its session has an actor.
		if !a.route(ctx, m.Session, m, false) {
			ctx.Respond(&messages.Ack{Error: ackNoPending})
		}
	case *messages.EndRun:
		a.routeJob(ctx, m.Session, m)
	case *messages.ClientResult:
		a.routeJob(ctx, m.Session, m)
	case *sessionIdle:
		a.passivate(ctx, m)
	case *actor.Terminated:
		a.terminated(ctx, m.Who)
	}
}

// routeJob routes an end-run or client result, which needs a session.
func (a *dispatcherActor) routeJob(ctx actor.Context, session string, msg any) {
	if session == "" {
		ctx.Respond(&messages.Ack{Error: ErrBadRequest.Error() + ": no session id"})
		return
	}
	a.route(ctx, session, msg, true)
}

// route delivers msg (with its original sender) to the session's actor,
// creating the actor when create is set. It reports whether it delivered.
func (a *dispatcherActor) route(ctx actor.Context, session string, msg any, create bool) bool {
	e := a.sessions[session]
	if e == nil {
		if !create {
			return false
		}
		e = a.spawn(ctx, session)
	}
	if e.stopping {
		e.held = append(e.held, envelope{msg, ctx.Sender()})
		return true
	}
	e.forwarded++
	ctx.RequestWithCustomSender(e.pid, msg, ctx.Sender())
	return true
}

func (a *dispatcherActor) spawn(ctx actor.Context, session string) *sessionEntry {
	cfg := a.cfg
	pid := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return newSessionActor(cfg, session) }))
	e := &sessionEntry{pid: pid}
	a.sessions[session] = e
	a.byPID[pid.Id] = session
	return e
}

// passivate stops an idle session actor when nothing is in flight to it.
func (a *dispatcherActor) passivate(ctx actor.Context, m *sessionIdle) {
	session, ok := a.byPID[ctx.Sender().GetId()]
	if !ok {
		return
	}
	e := a.sessions[session]
	if e == nil || e.stopping || e.forwarded != m.received {
		return
	}
	e.stopping = true
	ctx.Poison(e.pid)
}

func (a *dispatcherActor) terminated(ctx actor.Context, who *actor.PID) {
	session, ok := a.byPID[who.Id]
	if !ok {
		return
	}
	delete(a.byPID, who.Id)
	e := a.sessions[session]
	if e == nil || e.pid.Id != who.Id {
		return
	}
	delete(a.sessions, session)
	if len(e.held) == 0 {
		return
	}
	ne := a.spawn(ctx, session)
	for _, h := range e.held {
		ne.forwarded++
		ctx.RequestWithCustomSender(ne.pid, h.msg, h.sender)
	}
}
