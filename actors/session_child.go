package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/messages"
)

// childSession is a session actor spawned by the dispatcher actor: it
// lives only while its session has work. As soon as nothing runs and
// nothing is queued it tells the dispatcher (sessionIdle), which, when no
// request is on its way to it, asks for the session's state (releaseState:
// its commit actor hands the state to the dispatcher) and then stops it.
// The dispatcher hands that state to the session's next actor.
type childSession struct {
	session
	// state is the session's state from the dispatcher, until Started
	// hands it to the commit actor.
	state    *sessionState
	received uint64 // requests routed to it
	// reported: the dispatcher was told the session is idle after
	// reportedAt requests.
	reported   bool
	reportedAt uint64
}

func newChildSession(cfg *shared, id string, st *sessionState) *childSession {
	return &childSession{session: session{cfg: cfg, id: id}, state: st}
}

func (a *childSession) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.startCommit(ctx, a.state)
		a.state = nil
	case *releaseState:
		// The commit actor hands the state to the dispatcher.
		ctx.Forward(a.commit)
	case *Prepared, *messages.DispatchTurn, *messages.EndRun, *messages.ClientResult:
		a.received++
		if q, ok := a.arrive(ctx, m); ok {
			a.enqueue(ctx, q)
		}
	case *messages.AnswerQuestion:
		a.received++
		a.answer(ctx, m)
	case *messages.CancelTurn, *messages.ConfirmReply:
		a.received++
		a.receive(ctx)
	default:
		a.receive(ctx)
	}
	a.reportIdle(ctx)
}

// reportIdle tells the dispatcher actor, once per count of requests
// received, that the session has no work. The dispatcher stops the actor
// only if it has sent no request since (see dispatcherActor.passivate);
// otherwise the request on its way makes the actor report again when it is
// done with it.
func (a *childSession) reportIdle(ctx actor.Context) {
	if a.busy() || a.turns != 0 || a.resets != 0 || a.stopping || (a.reported && a.reportedAt == a.received) {
		return
	}
	switch ctx.Message().(type) {
	case *actor.Started, *actor.Restarting, *releaseState:
		return
	}
	a.reported, a.reportedAt = true, a.received
	// Request, not Send: the dispatcher finds the session by the sender.
	ctx.Request(ctx.Parent(), &sessionIdle{received: a.received})
}
