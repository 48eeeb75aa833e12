package actors

import "github.com/asynkron/protoactor-go/actor"

// rebalance tells a hosted session actor that its router moved the
// session to another member (a member joined): it finishes what it has
// taken, then stops (see deferRebalance).
type rebalance struct{}

// deferRebalance is the receiver middleware of hosted session actors. A
// cluster moves a session to a member that joins by poisoning its grain
// wherever it runs; a grain that is running a turn would stop its turn
// with it (its calls outcome_unknown). The poison reaches a busy actor as
// a rebalance instead: it finishes its running and queued turns, then
// stops itself when idle; the session's next turn goes to its new owner.
// A member that drains (Close) stops its grains at once: they are idle by
// then, or their turns were canceled.
func deferRebalance(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		if _, ok := env.Message.(*actor.PoisonPill); ok {
			if a, ok := c.Actor().(*hostedSession); ok && a.busy() && !a.cfg.drain.draining.Load() {
				next(c, actor.WrapEnvelope(&rebalance{}))
				return
			}
		}
		next(c, env)
	}
}

// leaveWhenIdle stops a hosted actor that was rebalanced away once it has
// nothing left to do.
func (a *hostedSession) leaveWhenIdle(ctx actor.Context) {
	if a.leaving && !a.busy() && !a.passivating && !a.stopping {
		a.passivating = true
		ctx.Poison(ctx.Self())
	}
}
