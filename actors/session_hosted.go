package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/messages"
)

// hostedSession is a session actor a router hosts (a cluster grain of
// kind session): it learns its session from its first request, spawns its
// commit actor then, with a state of its own (it dies with the grain), and
// stops itself after Config.SessionIdle without work. A request that
// reaches it while it stops, or a turn while its member drains, is
// answered *actor.DeadLetterResponse: nothing was taken, and the router
// asks again.
type hostedSession struct {
	session
	passivating bool // stopping: new requests go elsewhere
	leaving     bool // rebalanced away: it stops once idle
}

func newHostedSession(cfg *shared) *hostedSession {
	return &hostedSession{session: session{cfg: cfg}}
}

func (a *hostedSession) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.SetReceiveTimeout(a.cfg.SessionIdle)
	case *Prepared:
		a.take(ctx, m.turn.Session, m, true)
	case *messages.DispatchTurn:
		a.take(ctx, m.Session, m, true)
	case *messages.EndRun:
		a.take(ctx, m.Session, m, false)
	case *messages.ClientResult:
		a.take(ctx, m.Session, m, false)
	case *messages.ConfirmReply:
		if m.Stored && a.passivating {
			ctx.Respond(&actor.DeadLetterResponse{Target: ctx.Self()})
			break
		}
		if m.Stored {
			a.learn(ctx, m.Session)
		}
		a.receive(ctx)
	case *messages.AnswerQuestion:
		a.learn(ctx, m.Session)
		a.answer(ctx, m)
	case *actor.ReceiveTimeout:
		if !a.busy() {
			// Passivate after whatever is already queued (a user
			// message, unlike Stop, does not overtake them).
			ctx.Send(ctx.Self(), &passivate{})
		}
	case *passivate:
		if !a.busy() && !a.passivating {
			// The router activates the session again on the next
			// request, and it reloads from the store. Requests that
			// arrive before the poison pill is handled get a dead-letter
			// answer, which makes the router ask the new activation.
			a.passivating = true
			ctx.Poison(ctx.Self())
		}
	case *drainCancel:
		a.drainCancel(ctx)
	case *rebalance:
		a.leaving = true
	default:
		a.receive(ctx)
	}
	a.leaveWhenIdle(ctx)
	a.reportTurns(ctx)
}

// passivate asks a hosted session actor to stop if it is still idle.
type passivate struct{}

// take queues a turn or job for session, unless the actor is stopping or
// (a turn) its member drains.
func (a *hostedSession) take(ctx actor.Context, session string, msg any, turn bool) {
	if a.passivating || (turn && a.cfg.drain.draining.Load()) {
		// Nothing taken: the router asks again, and once this member
		// has left (it drains), the session's next owner takes it.
		ctx.Respond(&actor.DeadLetterResponse{Target: ctx.Self()})
		return
	}
	a.learn(ctx, session)
	if q, ok := a.arrive(ctx, msg); ok {
		a.enqueue(ctx, q)
	}
}

// learn gives the actor its session, from its first request, and starts
// its commit actor with a new state.
func (a *hostedSession) learn(ctx actor.Context, session string) {
	if a.id == "" && session != "" {
		a.id = session
		a.startCommit(ctx, &sessionState{})
	}
}

// reportTurns tells the member's drain board how many turns the actor has
// queued or running (none once it stopped).
func (a *hostedSession) reportTurns(ctx actor.Context) {
	n := len(a.queue)
	if a.current != nil && a.current.pid != nil {
		n++
	}
	if _, stopped := ctx.Message().(*actor.Stopped); stopped {
		n = 0
	}
	a.cfg.drain.set(ctx.Self(), n)
}

// drainCancel cancels the running turn at the end of the member's grace
// (its calls commit as canceled) and hands queued turns back untaken.
func (a *hostedSession) drainCancel(ctx actor.Context) {
	if a.current != nil && a.current.pid != nil {
		ctx.Send(a.current.pid, &messages.CancelTurn{Session: a.id, RequestId: a.current.requestID})
	}
	kept := a.queue[:0]
	for _, q := range a.queue {
		if _, ok := q.msg.(*Prepared); ok {
			send(ctx, q.sender, &actor.DeadLetterResponse{Target: ctx.Self()})
			continue
		}
		kept = append(kept, q)
	}
	a.queue = kept
}
