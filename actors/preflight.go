package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
)

// preflightInput is everything pass 1 needs; immutable.
type preflightInput struct {
	cfg      *shared
	view     *toolkit.View
	em       *emitter
	provider string
	calls    []*messages.ToolCall
	parsed   []preparedCall // rules 1 and 2 as Prepare read them, by call
	approve  string         // the turn's approval, settled by the policy
	text     string         // the model's text of the turn's assistant message
	deferAsk bool           // confirm defer: an approval is stored, not waited for
	session  string
	autoLoad bool
	turnCtx  context.Context
	run      string
	turn     int64
	chaos    *chaos.Policy // nil: no faults
}

// pass1 is pass 1 of one turn (SPEC §3): the rules of pass1Rules applied
// to each call in call order, and what they remember across calls. It runs
// on the turn's goroutine until a call has to wait, for a confirmation or
// for the stamp of the files it reads; a preflight actor then takes it
// over and goes on from that rule when the wait ends.
type pass1 struct {
	in *preflightInput
	// runState is the run's state (read only here), lent by the turn and
	// handed back with the plans.
	runState *cachestore.RunState
	plans    []*callPlan
	next     int       // the next call to plan
	cur      *callPlan // the call being planned; nil between calls
	at       int       // the rule cur has reached

	// What the rules of cur hand on to the later rules of cur (reset for
	// every call).
	viaRunTool bool            // rule 3 unwrapped run_tool (rule 5)
	schema     *toolkit.Schema // rule 4's compiled schema (rules 4–7)
	verr       error           // rule 6's validation result (rule 7)

	seenIDs  map[string]bool
	inTurn   map[string]*callPlan // by de-dup key: the first identical call of this turn
	invalid  map[string]bool      // run-state de-dup keys made stale earlier in this turn
	answered map[string]bool      // call ids whose confirmation was answered
	loaded   map[string]bool      // tools whose schema an earlier call of this turn loaded (AutoLoadSchemas)
	budget   *toolkit.MatchBudget // the turn's pattern matching; made by check
	canceled bool                 // the turn was canceled (rule 9 asks nobody)
}

// verdict is what a rule of pass 1 made of a call.
type verdict uint8

const (
	nextRule    verdict = iota // the call goes on to the next rule
	callDone                   // the call's preflight is over (decided, a follower, or cleared to run)
	waitConfirm                // the call waits for a confirmation (rule 9)
	waitStamp                  // the call waits for its stamp (rule 8)
)

// pass1Rules are the rules of pass 1 in the order SPEC §3 gives them; the
// first that decides a call ends its preflight. A rule that makes a call
// wait is run again when the wait ends.
var pass1Rules = [...]func(*pass1, *callPlan) verdict{
	rule1Normalise,
	rule2Parse,
	rule3UnwrapRunTool,
	rule4Existence,
	rule4ClientTool,
	rule5Deferred,
	rule6SchemaHandshake,
	rule7Validation,
	rule8Stamp,
	rule8Dedup,
	rule9ConfirmGate,
}

func newPass1(in *preflightInput, rs *cachestore.RunState) *pass1 {
	if in.turnCtx == nil {
		in.turnCtx = context.Background()
	}
	// Sized once for the turn's calls: no rehashing per call. invalid and
	// answered are made when first written (most turns write neither).
	return &pass1{in: in, runState: rs, plans: make([]*callPlan, 0, len(in.calls)),
		seenIDs: make(map[string]bool, len(in.calls)), inTurn: make(map[string]*callPlan, len(in.calls))}
}

// planUntilWait applies the rules to the calls in order until a call has
// to wait (returned, with what it waits for) or every call is planned
// (nil).
func (a *pass1) planUntilWait() (*callPlan, verdict) {
	for {
		if a.cur == nil {
			if a.next == len(a.in.calls) {
				return nil, callDone
			}
			a.cur, a.at = &callPlan{idx: a.next, dupOf: -1}, 0
			a.viaRunTool, a.schema, a.verr = false, nil, nil
			a.next++
			a.plans = append(a.plans, a.cur)
		}
		p, v := a.cur, nextRule
		for v == nextRule && a.at < len(pass1Rules) {
			if v = pass1Rules[a.at](a, p); v == nextRule {
				a.at++
			}
		}
		if v == waitConfirm || v == waitStamp {
			return p, v
		}
		a.cur = nil
	}
}

// done is pass 1's reply to its turn; the run's state goes back with it.
func (a *pass1) done() *preflightDone {
	rs := a.runState
	a.runState = nil
	return &preflightDone{plans: a.plans, run: rs}
}

// settle ends a call's preflight with its result and announces it. It is
// also pass 1's one undo: a call that rule 8 registered as the first of
// its kind in this turn and that a later rule ends is no longer the call
// later identical calls follow.
func (a *pass1) settle(p *callPlan, m *messages.ToolMessage) verdict {
	p.decided = m
	if p.dedupKey != "" && a.inTurn[p.dedupKey] == p {
		delete(a.inTurn, p.dedupKey)
	}
	var kind string
	switch toolkit.Status(m.Status) {
	case toolkit.StatusSkipped:
		kind = EventToolSkipped
	case toolkit.StatusDeduped:
		kind = EventToolDeduped
	case toolkit.StatusSchemaReturned:
		kind = EventSchemaReturned
	}
	if kind != "" && a.in.em.active() {
		a.in.em.emit(&messages.Event{Kind: kind, CallId: p.id, Tool: p.name, Injected: m.Injected})
	}
	return callDone
}

// decide ends a call's preflight with status and content.
func (a *pass1) decide(p *callPlan, st toolkit.Status, content string) verdict {
	return a.settle(p, toolMsg(p, st, content))
}

// skip ends a call that is not approved: skipped, for reason.
func (a *pass1) skip(p *callPlan, reason string) verdict {
	return a.decide(p, toolkit.StatusSkipped, skippedText(reason))
}

// mutated records that an approved call that is not read-only will run:
// identical calls before it in this turn and run-state entries it makes stale
// no longer stand for what a later call would see.
func (a *pass1) mutated(p *callPlan) {
	mut := mutationOf(p)
	for k, e := range a.runState.Dedup {
		if mut.invalidates(e) {
			if a.invalid == nil {
				a.invalid = map[string]bool{}
			}
			a.invalid[k] = true
		}
	}
	for k, q := range a.inTurn {
		if q != p && q.tool != nil && mut.invalidates(dedupEntry(q, "")) {
			delete(a.inTurn, k)
		}
	}
}

// planAll runs pass 1 on the turn's goroutine: it plans the calls in order
// and returns their plans, or, when a call has to wait, a preflight actor
// that handles that wait when it starts and goes on from there. Most turns
// wait for nothing, and then no actor is spawned: the rules, their order
// and the events are the same either way.
func planAll(in *preflightInput, rs *cachestore.RunState) (*preflightDone, *preflightActor) {
	a := newPass1(in, rs)
	if p, w := a.planUntilWait(); p != nil {
		return nil, &preflightActor{pass1: a, pending: p, pendingWait: w}
	}
	return a.done(), nil
}

// confirmTimedOut fires when a confirmation got no answer in time.
type confirmTimedOut struct{ idx int }

// stamped is a call's stamp (Tool.Stamp), taken on a goroutine of its own
// and piped back to the preflight actor; failed: the stamp panicked.
type stamped struct {
	idx    int
	stamp  string
	failed bool
}

// preflightActor carries pass 1 on from the first call that has to wait:
// it waits for one call at a time (a confirmation, asked one at a time and
// all before pass 2, or a stamp) with nothing blocking its Receive, and
// answers its turn with the plans.
type preflightActor struct {
	*pass1
	pending     *callPlan // planned before the actor started; waits when it starts
	pendingWait verdict

	stamping  *callPlan // waiting for its stamp
	asking    *callPlan // waiting for a confirmation
	askedAt   time.Time
	askTimer  *time.Timer
	askCancel context.CancelFunc // ends the Approver's context; nil without one
}

func (a *preflightActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p, w := a.pending, a.pendingWait
		a.pending = nil
		a.wait(ctx, p, w)
	case *stamped:
		a.stamped(ctx, m)
	case *forwardedConfirm:
		a.confirmReply(ctx, m)
	case *approverReply:
		a.approverReply(ctx, m)
	case *previewed:
		a.previewed(ctx, m)
	case *confirmTimedOut:
		switch {
		case a.asking == nil || a.asking.idx != m.idx:
		case a.in.deferAsk:
			a.decideAsk(ctx, false, "", "its preview took longer than "+deferPreviewTimeout.String())
		default:
			a.decideAsk(ctx, false, ConfirmTimedOut, "no answer within "+a.in.cfg.ConfirmTimeout.String())
		}
	case *messages.CancelTurn:
		a.cancelTurn(ctx)
	case *actor.Stopping:
		a.stopAsking()
	}
}

// wait starts what call p waits for.
func (a *preflightActor) wait(ctx actor.Context, p *callPlan, w verdict) {
	if w == waitStamp {
		a.takeStamp(ctx, p)
		return
	}
	a.ask(ctx, p)
}

// proceed plans calls until one has to wait or all are planned.
func (a *preflightActor) proceed(ctx actor.Context) {
	if p, w := a.planUntilWait(); p != nil {
		a.wait(ctx, p, w)
		return
	}
	ctx.Send(ctx.Parent(), a.done())
}

// cancelTurn: the turn was canceled. A pending confirmation is skipped, a
// pending stamp given up (the call is not answered from the de-dup table),
// and no later call is asked.
func (a *preflightActor) cancelTurn(ctx actor.Context) {
	a.canceled = true
	switch {
	case a.asking != nil:
		a.decideAsk(ctx, false, ConfirmCanceled, "the turn was canceled")
	case a.stamping != nil:
		a.stamped(ctx, &stamped{idx: a.stamping.idx, failed: true})
	}
}

// takeStamp takes call p's stamp off the actor's goroutine (a stamp opens
// and hashes files) and pipes it back; nothing is sent once the turn has
// ended or was canceled.
func (a *preflightActor) takeStamp(ctx actor.Context, p *callPlan) {
	a.stamping = p
	self, sys, tctx := ctx.Self(), ctx.ActorSystem(), a.in.turnCtx
	stamp, args, idx := p.tool.Stamp, p.args, p.idx
	go func() {
		m := takeStamp(stamp, args, idx)
		if tctx.Err() == nil {
			sys.Root.Send(self, m)
		}
	}()
}

// takeStamp runs a tool's Stamp; a panic is reported, not raised.
func takeStamp(stamp func(toolkit.Args) string, args toolkit.Args, idx int) (m *stamped) {
	m = &stamped{idx: idx}
	defer func() {
		if recover() != nil {
			m.stamp, m.failed = "", true
		}
	}()
	m.stamp = stamp(args)
	return m
}

// stamped goes on with the call whose stamp was taken.
func (a *preflightActor) stamped(ctx actor.Context, m *stamped) {
	p := a.stamping
	if p == nil || p.idx != m.idx {
		return
	}
	a.stamping = nil
	p.stamp, p.stampFailed, p.stamped = m.stamp, m.failed, true
	a.proceed(ctx)
}
