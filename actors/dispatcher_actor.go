package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// envelope is a message held for a session that is stopping.
type envelope struct {
	msg    any
	sender *actor.PID
}

// sessionEntry is the dispatcher's record of one session. While the
// session has work it has a session actor (pid); between turns it is only
// this record: the commit actor's state (next turn number, the runs'
// de-duplication tables and fetched schemas), kept for the next activation
// until the session has been idle for Config.SessionIdle.
//
// The state has one owner at a time, and moves: start hands it to the new
// session actor (which hands it to its commit actor) and the entry keeps
// none; when the session is idle its commit actor hands it back
// (stateReleased) before the session actor is stopped. A session actor
// that stops otherwise takes its state with it: the next activation loads
// the session from the store.
type sessionEntry struct {
	session   string
	pid       *actor.PID    // the session's actor; nil while it has none
	forwarded uint64        // messages sent to this incarnation
	stopping  bool          // pid was asked for its state, to stop it; its Terminated has not come
	held      []envelope    // messages that arrived while stopping
	state     *sessionState // nil while an actor owns it, or when there is none to keep

	// On the idle list (pid == nil): ordered by idleAt, the dispatcher's
	// clock reading when the last actor terminated.
	prev, next *sessionEntry
	idleAt     time.Duration
}

// dispatcherActor routes each request to its session's actor, creating it on
// demand and stopping it as soon as it reports it has no work; it keeps
// the session's state between activations and drops it (passivation) after
// Config.SessionIdle without work.
type dispatcherActor struct {
	cfg      *shared
	sessions map[string]*sessionEntry // by session id
	byPID    map[string]*sessionEntry // by the id of the session's live actor

	// Idle sessions, least recently active first, and one timer for the
	// first of them to expire.
	idleHead, idleTail *sessionEntry
	epoch              time.Time
	timer              *time.Timer
	armed, stopped     bool

	stopping   int        // session actors asked to stop whose Terminated has not come
	draining   bool       // closing: no session is asked to stop any more
	drainReply *actor.PID // answered once stopping is 0
}

// sweepIdle: the idle timer fired.
type sweepIdle struct{}

// drainSessions asks the dispatcher actor, before it is stopped, to stop
// no more idle sessions and to answer (drained) once those stopping have
// terminated.
type drainSessions struct{}

type drained struct{}

// drainTimeout bounds the wait for stopping sessions on Close.
const drainTimeout = 10 * time.Second

func newDispatcherActor(cfg *shared) *dispatcherActor {
	return &dispatcherActor{cfg: cfg, sessions: map[string]*sessionEntry{}, byPID: map[string]*sessionEntry{}, epoch: time.Now()}
}

// Supervision: a session actor that panics is stopped (the default strategy
// would restart it with its in-memory state lost mid-turn); its turn already
// answered or answers through its own Stopping handler, and the next request
// for the session starts a fresh actor that reloads from the store.
var sessionSupervisor = actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })

func (a *dispatcherActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Prepared:
		a.route(ctx, m.turn.Session, m, true)
	case *messages.DispatchTurn:
		// Prepared when it reaches its session; here only its session id
		// is looked at, to route it.
		if err := checkSessionID(m.GetSession()); err != nil {
			ctx.Respond(&messages.TurnResult{Session: m.GetSession(), Error: err.Error()})
			return
		}
		a.route(ctx, m.Session, m, true)
	case *messages.ConfirmReply:
		if m.Stored {
			// A deferred approval is answered by its session, started
			// for it.
			a.route(ctx, m.Session, m, true)
			return
		}
		if !a.route(ctx, m.Session, m, false) {
			ctx.Respond(&messages.ConfirmAck{Status: "not_found"})
		}
	case *messages.CancelTurn:
		a.route(ctx, m.Session, m, false)
	case *messages.AnswerQuestion:
		// A question is asked by a running turn, so its session has an
		// actor; without one, the board tells a question answered before
		// the session went idle from one never asked.
		if !a.route(ctx, m.Session, m, false) {
			err := ackError(a.cfg.board.answer(m.Session, m.CallId, toolkit.Answer{Text: m.Text, Declined: m.Declined, Origins: m.Origins}))
			a.cfg.traceDelivery(ctx, "AnswerQuestion", m.Traceparent, m.Tracestate, m.Session, m.CallId, err)
			ctx.Respond(&messages.Ack{Error: err})
		}
	case *messages.EndRun:
		a.routeJob(ctx, m.Session, m)
	case *messages.ClientResult:
		a.routeJob(ctx, m.Session, m)
	case *sessionIdle:
		a.passivate(ctx, m)
	case *stateReleased:
		a.released(ctx, m)
	case *actor.Terminated:
		a.terminated(ctx, m.Who)
	case *sweepIdle:
		a.armed = false
		a.sweep(ctx)
	case *drainSessions:
		a.draining, a.drainReply = true, ctx.Sender()
		a.drainDone(ctx)
	case *actor.Stopping, *actor.Stopped:
		a.stopped = true
		if a.timer != nil {
			a.timer.Stop()
		}
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
// starting the actor when create is set. It reports whether it delivered.
func (a *dispatcherActor) route(ctx actor.Context, session string, msg any, create bool) bool {
	e := a.sessions[session]
	if e == nil || e.pid == nil {
		if !create {
			return false
		}
		if e == nil {
			e = &sessionEntry{session: session}
			a.sessions[session] = e
		} else {
			a.unlinkIdle(e)
		}
		a.start(ctx, e)
	}
	if e.stopping {
		e.held = append(e.held, envelope{msg, ctx.Sender()})
		return true
	}
	e.forwarded++
	ctx.RequestWithCustomSender(e.pid, msg, ctx.Sender())
	return true
}

// start spawns the session's actor and hands it the kept state (a new
// one when none is kept): the entry keeps none while the actor lives.
// Only one actor of a session exists at a time (start runs when the entry
// has none, and after the previous one's Terminated).
func (a *dispatcherActor) start(ctx actor.Context, e *sessionEntry) {
	cfg, session, st := a.cfg, e.session, e.state
	if st == nil {
		st = &sessionState{}
	}
	e.state = nil
	e.pid = ctx.Spawn(cfg.props(func() actor.Actor { return newChildSession(cfg, session, st) }))
	e.forwarded = 0
	a.byPID[e.pid.Id] = e
}

// passivate asks a session actor that reported it has no work, when
// nothing is in flight to it, for its state; released stops it once the
// state is back. Messages for the session are held from here on.
func (a *dispatcherActor) passivate(ctx actor.Context, m *sessionIdle) {
	e := a.byPID[ctx.Sender().GetId()]
	if e == nil || e.stopping || e.forwarded != m.received || a.draining {
		return
	}
	e.stopping = true
	a.stopping++
	ctx.Request(e.pid, &releaseState{session: e.session})
}

// released keeps the state a stopping session's commit actor handed back
// and stops the session actor.
func (a *dispatcherActor) released(ctx actor.Context, m *stateReleased) {
	e := a.sessions[m.session]
	if e == nil || e.pid == nil || !e.stopping {
		return
	}
	e.state = m.state
	ctx.Poison(e.pid)
}

// drainDone answers a drainSessions once no session is stopping.
func (a *dispatcherActor) drainDone(ctx actor.Context) {
	if a.draining && a.stopping == 0 && a.drainReply != nil {
		ctx.Send(a.drainReply, &drained{})
		a.drainReply = nil
	}
}

func (a *dispatcherActor) terminated(ctx actor.Context, who *actor.PID) {
	e := a.byPID[who.Id]
	if e == nil {
		return
	}
	delete(a.byPID, who.Id)
	if e.stopping {
		a.stopping--
		defer a.drainDone(ctx)
	}
	// Stopped because it had no work, with its state handed back; any
	// other stop (a failure, the dispatcher stopping) took the state with
	// it, and the next activation reloads from the store.
	clean := e.stopping && e.state != nil
	e.pid, e.stopping = nil, false
	switch {
	case len(e.held) != 0:
		held := e.held
		e.held = nil
		a.start(ctx, e)
		for _, h := range held {
			e.forwarded++
			ctx.RequestWithCustomSender(e.pid, h.msg, h.sender)
		}
	case !clean || a.stopped:
		delete(a.sessions, e.session)
	default:
		e.idleAt = time.Since(a.epoch)
		a.pushIdle(e)
		a.arm(ctx)
	}
}

// pushIdle appends e to the idle list (it is the most recently active).
func (a *dispatcherActor) pushIdle(e *sessionEntry) {
	e.prev, e.next = a.idleTail, nil
	if a.idleTail != nil {
		a.idleTail.next = e
	} else {
		a.idleHead = e
	}
	a.idleTail = e
}

// unlinkIdle takes e off the idle list.
func (a *dispatcherActor) unlinkIdle(e *sessionEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		a.idleHead = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		a.idleTail = e.prev
	}
	e.prev, e.next = nil, nil
}

// sweep passivates the sessions idle for Config.SessionIdle: their state
// is dropped, and their next request loads it from the store.
func (a *dispatcherActor) sweep(ctx actor.Context) {
	now := time.Since(a.epoch)
	for e := a.idleHead; e != nil && now-e.idleAt >= a.cfg.SessionIdle; e = a.idleHead {
		a.unlinkIdle(e)
		delete(a.sessions, e.session)
	}
	a.arm(ctx)
}

// arm sets the timer for the first idle session to expire.
func (a *dispatcherActor) arm(ctx actor.Context) {
	if a.armed || a.stopped || a.idleHead == nil {
		return
	}
	d := a.idleHead.idleAt + a.cfg.SessionIdle - time.Since(a.epoch)
	a.armed = true
	if a.timer == nil {
		root, self := ctx.ActorSystem().Root, ctx.Self()
		a.timer = time.AfterFunc(d, func() { root.Send(self, &sweepIdle{}) })
		return
	}
	a.timer.Reset(d)
}
