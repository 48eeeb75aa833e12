package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

const defaultRun = "default"

// commitFailedNext is what a turn whose commit failed is told after the
// store's error: the store may have applied the write all the same (a
// failing fsync reports a write it made), so the session says which.
const commitFailedNext = "the session may hold the turn all the same (a write reported failed may have been applied): " +
	"read the session back, or send the turn again with its turn_id, which replays it if it was committed; " +
	"otherwise calls that may have started read outcome_unknown once the session is loaded again"

// turnActor runs one turn through the three passes: it prepares the turn
// with the commit actor, runs pass 1 itself until a call has to wait (then
// spawns the preflight actor for the rest of it), spawns the pool (pass
// 2), hands the outcome to the commit actor (pass 3), emits the
// tool_result events and answers its requester exactly once.
type turnActor struct {
	cfg     *shared
	session string
	commit  *actor.PID
	p       *Prepared
	req     *messages.DispatchTurn // p.turn
	replyTo *actor.PID

	run      string
	provider string
	turn     int64
	// runState is the run's state, lent by the commit actor: the turn
	// lends it on to pass 1 (which hands it back with its plans) and hands
	// it back to the commit actor with its commit.
	runState *cachestore.RunState
	em       *emitter

	ctx    context.Context
	cancel context.CancelFunc

	preflight *actor.PID
	pool      *actor.PID
	plans     []*callPlan
	replied   bool

	// The commit actor's replies come back as plain messages (Request and
	// Respond: no future process and timer per round trip); the turn has at
	// most one request out at a time. The commit actor always answers (it
	// recovers from its own panics and bounds every store call).
	committing bool                    // a commitTurn is out
	msgs       []*messages.ToolMessage // the messages being committed
	began      time.Time

	tr      *turnTrace     // nil when tracing is off
	log     zerolog.Logger // cfg.Logger with the turn's trace ids
	started time.Time
}

// coordinatorProps spawns an actor that only coordinates (the pool): its
// Receive waits on nothing and does little, so its mailbox runs on the
// sender's goroutine instead of a fresh goroutine per mailbox run. A call
// actor handing its outcome to the pool then runs the pool's bookkeeping
// and picks up its next call on the same goroutine: no goroutine hand-off
// per call. An actor whose Receive does work of its own (the turn runs
// pass 1) must not use it: its work would run on any sender's goroutine,
// the session actor's among them.
func coordinatorProps(producer actor.Producer) *actor.Props {
	return actor.PropsFromProducer(producer, actor.WithDispatcher(syncDispatcher))
}

var syncDispatcher = actor.NewSynchronizedDispatcher(300)

// newTurnActor returns the actor of turn p; ctx is the turn's context,
// which cancel (the session's, on a cancellation) ends.
func newTurnActor(cfg *shared, session string, commit *actor.PID, p *Prepared, replyTo *actor.PID,
	ctx context.Context, cancel context.CancelFunc) *turnActor {
	req := p.turn
	run := cmp.Or(req.Run, defaultRun)
	provider := cmp.Or(req.Provider, defaultProvider)
	return &turnActor{cfg: cfg, session: session, commit: commit, p: p, req: req, replyTo: replyTo, run: run, provider: provider,
		ctx: ctx, cancel: cancel}
}

func (a *turnActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.start(ctx)
	case *preflightDone:
		a.preflightDone(ctx, m)
	case *prepared:
		a.prepared(ctx, m)
	case *storeDone:
		if a.committing {
			a.committing = false
			a.committed(ctx, m.err)
		}
	case *poolDone:
		a.poolDone(ctx, m)
	case *messages.CancelTurn:
		a.cancelTurn(ctx, m)
	case *forwardedConfirm:
		if a.preflight == nil {
			answerConfirm(ctx, m, confirmNotFound)
			return
		}
		ctx.Forward(a.preflight)
	case *actor.Stopping:
		if a.cancel != nil {
			a.cancel()
		}
		a.reply(ctx, &messages.TurnResult{Session: a.session, Run: a.run, Turn: a.turn,
			Error: "the turn was stopped (shutdown or an internal error); calls that may have started read outcome_unknown"}, true)
	}
}

// HandleFailure: a failure of the preflight or pool actor is a failure of the
// turn; the session, its supervisor, answers the requester.
func (a *turnActor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, _ *actor.PID, _ *actor.RestartStatistics, reason any, msg any) {
	sup.EscalateFailure(reason, msg)
}

func (a *turnActor) start(ctx actor.Context) {
	a.started = time.Now()
	var member string
	if a.cfg.member {
		member = ctx.ActorSystem().Address()
	}
	a.tr = startTurnTrace(&a.cfg.Config, a.session, a.run, a.provider, a.req, member)
	a.log = a.tr.logger(a.cfg.Logger)
	ctx.Request(a.commit, &prepareTurn{run: a.run, turnID: a.req.TurnId, callsHash: a.p.callsHash})
}

func (a *turnActor) prepared(ctx actor.Context, p *prepared) {
	switch {
	case a.turn != 0 || a.replied:
		// not this turn's request (never happens: one prepare per turn)
	case p.err != nil:
		a.reply(ctx, &messages.TurnResult{Session: a.session, Run: a.run, Error: "loading the session: " + p.err.Error(),
			NoSpace: errors.Is(p.err, cachestore.ErrNoSpace)}, true)
	case p.conflict:
		a.reply(ctx, &messages.TurnResult{Session: a.session, Run: a.run, Conflict: true,
			Error: fmt.Sprintf("turn_id %q is already committed (turn %d) with other calls; nothing ran. "+
				"Send the same calls to replay that turn, or use a new turn_id.", messages.ClipText(a.req.TurnId, 80), p.replay.GetTurn())}, false)
	case p.replay != nil:
		a.reply(ctx, &messages.TurnResult{Session: a.session, Run: p.replay.Run, Turn: p.replay.Turn,
			Messages: p.replay.ToolMessages, Replayed: true}, false)
	default:
		a.turn, a.runState = p.next, p.run
		a.em = newEmitter(&a.cfg.Config, a.session, a.run, a.turn, a.req.RequestId).numberedIn(p.events)
		a.tr.numbered(a.turn)
		a.startPreflight(ctx)
	}
}

func (a *turnActor) startPreflight(ctx actor.Context) {
	in := &preflightInput{
		cfg: a.cfg, view: a.p.view, em: a.em, provider: a.provider, run: a.run, turn: a.turn, chaos: a.p.chaos,
		calls: a.req.Message.GetToolCalls(), text: a.req.Message.GetContent(), parsed: a.p.calls, approve: a.p.Approve(),
		autoLoad: a.req.AutoLoadSchemas, turnCtx: a.ctx, deferAsk: a.req.Confirm == ConfirmDefer, session: a.session,
	}
	if a.p.ApproveLowered() && a.em.active() {
		a.em.emit(policyLoweredEvent(a.p.ApproveAsked(), a.p.Approve()))
	}
	a.tr.startPreflight()
	rs := a.runState
	a.runState = nil
	done, waiting := planAll(in, rs)
	if waiting == nil {
		// Nothing to wait for: pass 1 is over without a preflight actor.
		a.preflightDone(ctx, done)
		return
	}
	// Off the synchronized dispatcher: after a wait (an answer, a stamp)
	// the rest of pass 1 runs on the preflight's own goroutine, not on the
	// goroutine of whoever sent the answer (the session actor, for one).
	a.preflight = ctx.Spawn(a.cfg.props(func() actor.Actor { return waiting }))
}

func (a *turnActor) preflightDone(ctx actor.Context, m *preflightDone) {
	a.plans, a.runState = m.plans, m.run
	// The preflight actor, idle from here on, is stopped with the turn's
	// other children when the turn stops: one Stop per child. Stopping it
	// here as well raced its Terminated notice, and the turn's own stop then
	// sent a second Stop to a dead actor (a dead letter).
	a.preflight = nil
	var run []*callPlan
	for _, p := range a.plans {
		if p.decided == nil && p.dupOf < 0 {
			run = append(run, p)
		}
	}
	a.tr.preflightDone(a.plans, len(run))
	if len(run) == 0 {
		a.commitTurn(ctx, nil)
		return
	}
	a.tr.startExecute(len(run))
	intent := &cachestore.Intent{
		Session: a.session, Turn: a.turn, Run: a.run, TurnID: a.req.TurnId, Provider: a.provider,
		Assistant: a.req.Message, Decided: map[int]*messages.ToolMessage{}, CallsHash: a.p.callsHash,
		Names: make([]string, len(a.plans)), IDs: make([]string, len(a.plans)),
	}
	for i, p := range a.plans {
		intent.Names[i], intent.IDs[i] = p.name, p.id
		if p.decided != nil {
			intent.Decided[i] = p.decided
		}
	}
	in := &poolInput{cfg: a.cfg, em: a.em, view: a.p.view, session: a.session, run: a.run, turn: a.turn,
		commit: a.commit, followers: followers(a.plans), tr: a.tr, log: a.log}
	a.pool = ctx.Spawn(coordinatorProps(func() actor.Actor { return newPoolActor(in) }))
	ctx.Send(a.pool, &runCalls{ctx: a.ctx, plans: run, intent: intent})
}

func followers(plans []*callPlan) map[int][]int {
	var f map[int][]int
	for _, p := range plans {
		if p.dupOf >= 0 {
			if f == nil {
				f = map[int][]int{}
			}
			f[p.dupOf] = append(f[p.dupOf], p.idx)
		}
	}
	return f
}

func (a *turnActor) poolDone(ctx actor.Context, m *poolDone) {
	a.commitTurn(ctx, m.outcomes)
}

func (a *turnActor) cancelTurn(ctx actor.Context, m *messages.CancelTurn) {
	if a.cancel != nil {
		a.cancel()
	}
	if a.preflight != nil {
		ctx.Send(a.preflight, m)
	}
	if a.pool != nil {
		ctx.Send(a.pool, m)
	}
}

// commitTurn builds the turn's messages in call order and the run-state
// changes, and asks the commit actor to write them in one transaction.
func (a *turnActor) commitTurn(ctx actor.Context, outcomes map[int]*callOutcome) {
	msgs, fetched, cachePut := a.results(outcomes)
	for _, m := range msgs {
		if m.Injected != "" {
			a.cfg.Observer.Injected(m.Name, m.Injected)
		}
	}
	for _, m := range msgs {
		if a.cfg.Redactor != nil {
			m.Content = a.cfg.Redactor.Redact(m.Content)
		}
	}
	dedupPut, dedupDel := a.dedupChanges(msgs)
	for _, m := range msgs {
		withNext(m)
	}
	c := &cachestore.TurnCommit{
		Session: a.session,
		Record: &messages.TurnRecord{Turn: a.turn, Run: a.run, TurnId: a.req.TurnId, Assistant: a.req.Message,
			ToolMessages: msgs, TimeUnixNano: a.cfg.Clock().UnixNano(), Provider: a.provider, CallsHash: a.p.callsHash},
		FetchedAdd: dedupStrings(fetched),
		DedupPut:   dedupPut,
		DedupDel:   dedupDel,
		CachePut:   cachePut,
		Approvals:  a.approvals(msgs),
	}
	a.msgs, a.began, a.committing = msgs, time.Now(), true
	a.tr.startCommit(len(msgs))
	rs := a.runState
	a.runState = nil
	ctx.Request(a.commit, &commitTurn{commit: c, run: rs})
}

// results is the turn's tool messages in call order (pass 1's decisions,
// pass 2's outcomes, a follower's copy of its original), with the schemas
// to mark fetched and the cache entries to write.
func (a *turnActor) results(outcomes map[int]*callOutcome) (msgs []*messages.ToolMessage, fetched []string, cachePut []cachestore.CacheEntry) {
	msgs = make([]*messages.ToolMessage, len(a.plans))
	for _, p := range a.plans {
		switch {
		case p.decided != nil:
			msgs[p.idx] = p.decided
		case p.dupOf >= 0:
			// filled below, once the original is known
		default:
			o := outcomes[p.idx]
			if o == nil {
				o = &callOutcome{idx: p.idx, msg: toolMsg(p, toolkit.StatusError, "internal error: the call produced no result")}
			}
			msgs[p.idx] = o.msg
			fetched = append(fetched, o.fetched...)
			if o.cache != nil && o.msg.Status == string(toolkit.StatusOK) && o.msg.Injected == "" {
				cachePut = append(cachePut, cachestore.CacheEntry{Key: o.cache.Key, Value: o.cache.Value, Expires: o.cache.Expires})
			}
		}
		if p.fetch {
			fetched = append(fetched, p.name)
		}
	}
	for _, p := range a.plans {
		if p.dupOf >= 0 {
			orig := msgs[p.dupOf]
			msgs[p.idx] = toolMsg(p, toolkit.StatusDeduped, orig.Content)
			msgs[p.idx].Injected = orig.Injected
			msgs[p.idx].Parts = orig.Parts
		}
	}
	return msgs, fetched, cachePut
}

// committed finishes the turn once the commit actor has answered.
func (a *turnActor) committed(ctx actor.Context, err error) {
	msgs := a.msgs
	if err != nil {
		// No messages: what was not committed is not handed out (the
		// store reads the turn as interrupted).
		a.reply(ctx, &messages.TurnResult{Session: a.session, Run: a.run, Turn: a.turn,
			Error: "committing the turn: " + err.Error() + "; " + commitFailedNext, NoSpace: errors.Is(err, cachestore.ErrNoSpace),
			Fenced: errors.Is(err, cachestore.ErrFenced)}, true)
		return
	}
	obs := a.cfg.Observer
	obs.Committed(len(msgs), time.Since(a.began))
	for _, m := range msgs {
		obs.CallDone(m.Name, m.Status)
	}
	if a.em.active() {
		for _, m := range msgs {
			a.em.emit(&messages.Event{Kind: EventToolResult, CallId: m.ToolCallId, Tool: m.Name, Status: m.Status, Text: a.em.clip(m.Content, maxEventText), Injected: m.Injected})
		}
	}
	a.reply(ctx, &messages.TurnResult{Session: a.session, Run: a.run, Turn: a.turn, Messages: msgs}, false)
}

// reply answers the requester once, tells the session and stops the turn.
func (a *turnActor) reply(ctx actor.Context, r *messages.TurnResult, failed bool) {
	if a.replied {
		return
	}
	a.replied = true
	if a.cfg.member {
		r.Member = ctx.ActorSystem().Address()
	}
	a.tr.end(r)
	logTurn(a.log, a.session, r, a.started)
	// The session first: a request its requester sends on reading the
	// result (an answer to a deferred call) finds the turn over.
	ctx.Send(ctx.Parent(), &turnFinished{pid: ctx.Self(), failed: failed})
	send(ctx, a.replyTo, r)
	if a.cancel != nil {
		a.cancel()
	}
	ctx.Stop(ctx.Self())
}

func dedupStrings(in []string) []string {
	if len(in) < 2 {
		return in
	}
	seen := make(map[string]bool, len(in))
	out := in[:0:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
