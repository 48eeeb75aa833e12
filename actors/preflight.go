package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
)

// preflightInput is everything pass 1 needs; immutable.
type preflightInput struct {
	cfg      Config
	view     *toolkit.View
	runState *cachestore.RunState // read-only
	em       *emitter
	provider string
	calls    []*messages.ToolCall
	approve  string
	autoLoad bool
	turnCtx  context.Context
	run      string
	turn     int64
	chaos    *chaos.Policy // nil: no faults
}

// confirmTimedOut fires when a confirmation got no answer in time.
type confirmTimedOut struct{ idx int }

// preflightActor applies the rules of pass 1 to each call in order, asking
// for confirmations one at a time, and answers its turn with the plans.
type preflightActor struct {
	in    *preflightInput
	plans []*callPlan
	next  int

	seenIDs  map[string]bool
	inTurn   map[string]*callPlan // by de-dup key: the first identical call of this turn
	invalid  map[string]bool      // run-state de-dup keys made stale earlier in this turn
	answered map[string]bool      // call ids whose confirmation was answered

	budget *toolkit.MatchBudget // the turn's pattern matching; made by check

	asking    *callPlan // waiting for a confirmation
	pending   *callPlan // planned before the actor started; to be asked when it starts
	askedAt   time.Time
	askTimer  *time.Timer
	askCancel context.CancelFunc // ends the Approver's context; nil without one
	canceled  bool
}

func newPreflightActor(in *preflightInput) *preflightActor {
	// seenIDs and inTurn are sized by sizeFor; invalid and answered are
	// made when first written (most turns write neither).
	return &preflightActor{in: in}
}

func (a *preflightActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		// planAll spawns it with the calls before this one planned.
		p := a.pending
		a.pending = nil
		a.ask(ctx, p)
	case *messages.ConfirmReply:
		a.confirmReply(ctx, m)
	case *approverReply:
		a.approverReply(ctx, m)
	case *previewed:
		a.previewed(ctx, m)
	case *confirmTimedOut:
		if a.asking != nil && a.asking.idx == m.idx {
			a.decideAsk(ctx, false, fmt.Sprintf("no answer within %s", a.in.cfg.ConfirmTimeout))
		}
	case *messages.CancelTurn:
		a.canceled = true
		if a.asking != nil {
			a.decideAsk(ctx, false, "the turn was canceled")
		}
	case *actor.Stopping:
		if a.askTimer != nil {
			a.askTimer.Stop()
		}
		if a.askCancel != nil {
			a.askCancel()
		}
	}
}

// sizeFor sizes the plans and per-turn maps once for the turn's calls: no
// rehashing per call.
func (a *preflightActor) sizeFor() {
	a.plans = make([]*callPlan, 0, len(a.in.calls))
	a.seenIDs = make(map[string]bool, len(a.in.calls))
	a.inTurn = make(map[string]*callPlan, len(a.in.calls))
}

// planAll runs pass 1 without an actor, on the turn's goroutine: it plans
// the calls in order and returns their plans, or, when a call needs a
// confirmation, nil and a preflight actor that asks for it when it starts
// and goes on from there. Most turns ask nothing, and then no actor is
// spawned: the rules, their order and the events are the same either way.
func planAll(in *preflightInput) ([]*callPlan, *preflightActor) {
	a := newPreflightActor(in)
	a.sizeFor()
	if p := a.planUntilAsk(); p != nil {
		a.pending = p
		return nil, a
	}
	return a.plans, nil
}

// planUntilAsk plans calls until one needs a confirmation (returned) or all
// are planned (nil).
func (a *preflightActor) planUntilAsk() *callPlan {
	for a.next < len(a.in.calls) {
		i := a.next
		a.next++
		p, ask := a.plan(i, a.in.calls[i])
		a.plans = append(a.plans, p)
		if ask {
			return p
		}
	}
	return nil
}

// proceed plans calls until one needs a confirmation or all are planned.
func (a *preflightActor) proceed(ctx actor.Context) {
	if p := a.planUntilAsk(); p != nil {
		a.ask(ctx, p)
		return
	}
	ctx.Send(ctx.Parent(), &preflightDone{plans: a.plans})
}

func (a *preflightActor) decide(p *callPlan, st toolkit.Status, content string) *callPlan {
	p.decided = toolMsg(p, st, content)
	switch st {
	case toolkit.StatusSkipped:
		a.in.em.call(EventToolSkipped, p.id, p.name)
	case toolkit.StatusDeduped:
		a.in.em.call(EventToolDeduped, p.id, p.name)
	case toolkit.StatusSchemaReturned:
		a.in.em.call(EventSchemaReturned, p.id, p.name)
	}
	return p
}

// plan applies rules 1–9 of pass 1 to one call. ask reports that the call
// waits for a confirmation.
func (a *preflightActor) plan(i int, tc *messages.ToolCall) (p *callPlan, ask bool) {
	in := a.in
	// 1. Normalise.
	p = &callPlan{idx: i, dupOf: -1}
	p.id = strings.TrimSpace(tc.GetId())
	p.name = toolkit.NormaliseName(tc.GetFunction().GetName())
	repeated := p.id != "" && a.seenIDs[p.id]
	if p.id == "" {
		p.id = fmt.Sprintf("call_%d", i+1)
		for a.seenIDs[p.id] {
			p.id += "_"
		}
	}
	a.seenIDs[p.id] = true
	if in.em.active() {
		in.em.emit(&messages.Event{Kind: EventToolCall, CallId: p.id, Tool: p.name, Arguments: in.em.clip(tc.GetFunction().GetArguments(), maxEventArguments)})
	}
	if i >= in.cfg.MaxCallsPerTurn {
		return a.decide(p, toolkit.StatusInvalidArgs, fmt.Sprintf("not run: this turn has %d calls and at most %d are dispatched per turn; split the work over several turns.", len(in.calls), in.cfg.MaxCallsPerTurn)), false
	}
	if repeated {
		return a.decide(p, toolkit.StatusInvalidArgs, fmt.Sprintf("not run: call id %q repeats an earlier call's id in this turn; every call needs its own id.", messages.ClipText(p.id, 80))), false
	}
	if p.name == "" {
		return a.decide(p, toolkit.StatusUnknownTool, "not run: the call names no tool. Use find_tools to search the available tools."), false
	}
	// 2. Parse once.
	args, err := toolkit.ParseArgs(tc.GetFunction().GetArguments(), in.cfg.Limits)
	if err != nil {
		return a.decide(p, toolkit.StatusInvalidArgs, "not run: "+err.Error()), false
	}
	// 3. Unwrap run_tool.
	viaRunTool := false
	if p.name == toolkit.RunToolName {
		if rt, ok := in.view.Lookup(toolkit.RunToolName); ok {
			if args, err = in.view.StrictArgs(rt, args, in.cfg.Limits); err != nil {
				return a.decide(p, toolkit.StatusInvalidArgs, "not run: "+err.Error()), false
			}
		}
		name, inner, err := toolkit.UnwrapRunTool(args, in.cfg.Limits)
		if err != nil {
			return a.decide(p, toolkit.StatusInvalidArgs, "not run: "+err.Error()), false
		}
		p.name, args, viaRunTool = name, inner, true
	}
	p.args = args
	// 4. Existence.
	tool, ok := in.view.Lookup(p.name)
	if !ok {
		return a.decide(p, toolkit.StatusUnknownTool, unknownToolText(p.name, in.view)), false
	}
	p.tool = tool
	// In a strict tools format a null for an optional property means it
	// is absent: the full schema judges what the model meant.
	if args, err = in.view.StrictArgs(tool, args, in.cfg.Limits); err != nil {
		return a.decide(p, toolkit.StatusInvalidArgs, "not run: "+err.Error()), false
	}
	p.args = args
	schema, err := in.cfg.Registry.Schemas.Compile(tool.Schema)
	if err != nil {
		return a.decide(p, toolkit.StatusError, "not run: the tool's schema does not compile: "+err.Error()), false
	}
	if in.view.IsClient(p.name) {
		if err := a.check(schema, args); err != nil {
			return a.refuse(p, err), false
		}
		return a.decide(p, toolkit.StatusClientPending, "client tool: the caller runs this call and hands its result back."), false
	}
	// 5. Deferred tools: under ArrayLazy, a tool outside the array (not a
	// core tool, not AlwaysInArray) is reached through run_tool only.
	if in.view.Policy() == toolkit.ArrayLazy && !viaRunTool && !in.view.InArray(p.name) {
		return a.decide(p, toolkit.StatusDeferred, deferredText(p.name)), false
	}
	// 6. Schema handshake.
	verr := a.check(schema, args)
	if errors.Is(verr, toolkit.ErrCheckCanceled) {
		return a.refuse(p, verr), false
	}
	if !in.view.StartsFetched(p.name) && !in.runState.Fetched[p.name] {
		p.fetch = true
		if !in.autoLoad || verr != nil {
			return a.decide(p, toolkit.StatusSchemaReturned, schemaReturnedText(tool, verr)), false
		}
	}
	// 7. Validation.
	if verr != nil {
		return a.decide(p, toolkit.StatusInvalidArgs, verr.Error()), false
	}
	// 8. De-duplication.
	p.readOnly = tool.IsReadOnly(args)
	if !tool.NoDedup {
		p.dedupKey = toolkit.DedupKey(p.name, args)
		p.takeStamp()
		if e, ok := in.runState.Dedup[p.dedupKey]; ok && !a.invalid[p.dedupKey] && e.Stamp == p.stamp {
			return a.decide(p, toolkit.StatusDeduped, e.Content), false
		}
		if first, ok := a.inTurn[p.dedupKey]; ok {
			p.dupOf = first.idx
			in.em.call(EventToolDeduped, p.id, p.name)
			return p, false
		}
		a.inTurn[p.dedupKey] = p
	}
	p.fault = in.chaos.Decide(in.run, in.turn, p.idx, p.name)
	// 9. Confirm gate.
	if p.readOnly {
		if p.fault.Injected() && p.fault.Fault.Kind == chaos.KindDeny {
			p.fault = chaos.Decision{} // only calls that ask can be denied
		}
		return p, false
	}
	if p.fault.Injected() && p.fault.Fault.Kind == chaos.KindDeny {
		delete(a.inTurn, p.dedupKey)
		p.decided = toolMsg(p, toolkit.StatusSkipped, skippedText(p.fault.Replacement(0)))
		p.decided.Injected = p.fault.Label()
		if in.em.active() {
			in.em.emit(&messages.Event{Kind: EventToolSkipped, CallId: p.id, Tool: p.name, Injected: p.decided.Injected})
		}
		return p, false
	}
	switch {
	case in.approve == ApproveAll:
		a.mutated(p)
		return p, false
	case in.approve != ApproveAsk:
		delete(a.inTurn, p.dedupKey)
		return a.decide(p, toolkit.StatusSkipped, skippedText("this run does not allow calls that change things")), false
	case in.cfg.Approver == nil && !in.em.active():
		delete(a.inTurn, p.dedupKey)
		return a.decide(p, toolkit.StatusSkipped, skippedText("nobody is listening for confirmations")), false
	case a.canceled:
		delete(a.inTurn, p.dedupKey)
		return a.decide(p, toolkit.StatusSkipped, skippedText("the turn was canceled")), false
	}
	return p, true
}

// mutated records that an approved call that is not read-only will run:
// identical calls before it in this turn and run-state entries it makes stale
// no longer stand for what a later call would see.
func (a *preflightActor) mutated(p *callPlan) {
	mut := mutationOf(p)
	for k, e := range a.in.runState.Dedup {
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

// ask puts the call to the Approver, or else to whoever answers tool_confirm
// events with Confirm; the answer comes back as a message. A call whose tool
// previews the files it changes is asked once its preview is computed (off
// the actor's goroutine: it reads files), with the preview.
func (a *preflightActor) ask(ctx actor.Context, p *callPlan) {
	a.asking = p
	a.askedAt = time.Now()
	p.argsHash = p.args.Hash() // only a confirmation names it
	self, sys, idx := ctx.Self(), ctx.ActorSystem(), p.idx
	a.askTimer = time.AfterFunc(a.in.cfg.ConfirmTimeout, func() { sys.Root.Send(self, &confirmTimedOut{idx: idx}) })
	if pv := p.tool.Preview; pv != nil {
		pctx, cancel := context.WithTimeout(a.in.turnCtx, a.in.cfg.ConfirmTimeout)
		a.askCancel = cancel
		args := p.args
		go func() {
			m := computePreview(pctx, pv, args, idx)
			if pctx.Err() == nil {
				sys.Root.Send(self, m)
			}
		}()
		return
	}
	a.put(ctx, p, toolkit.Preview{})
}

// previewed asks the pending call with its preview, and binds its approval
// to the state the preview read.
func (a *preflightActor) previewed(ctx actor.Context, m *previewed) {
	p := a.asking
	if p == nil || p.idx != m.idx || p.bound {
		return
	}
	if a.askCancel != nil {
		a.askCancel()
		a.askCancel = nil
	}
	if m.failed != "" {
		a.decideAsk(ctx, false, "its preview could not be computed: "+m.failed)
		return
	}
	p.bound, p.boundState = true, m.preview.State
	pv := m.preview
	if note := earlierWriters(a.plans, p); note != "" {
		pv.Note = strings.TrimSpace(pv.Note + "\n" + note)
	}
	a.put(ctx, p, shown(pv, a.in.cfg.Redactor))
}

// put asks for the pending call's approval.
func (a *preflightActor) put(ctx actor.Context, p *callPlan, pv toolkit.Preview) {
	self, sys := ctx.Self(), ctx.ActorSystem()
	pv.Note = withToolNote(pv.Note, p.tool)
	if ap := a.in.cfg.Approver; ap != nil {
		// Off the actor's goroutine: the Approver may block; its answer is
		// piped back and checked against the call id and args hash.
		actx, cancel := context.WithTimeout(a.in.turnCtx, a.in.cfg.ConfirmTimeout-time.Since(a.askedAt))
		a.askCancel = cancel
		req := ApprovalRequest{Session: a.in.em.session, Run: a.in.run, Turn: a.in.turn, CallID: p.id, Tool: p.name,
			Args: slices.Clone(p.args.Canonical), ArgsHash: p.argsHash, Diff: pv.Diff, Note: pv.Note, StateHash: pv.StateHash()}
		go func() {
			if r := askApprover(actx, ap, req); r != nil {
				sys.Root.Send(self, r)
			}
		}()
		return
	}
	a.in.em.emit(&messages.Event{Kind: EventToolConfirm, CallId: p.id, Tool: p.name, ArgsHash: p.argsHash,
		Arguments: a.in.em.clip(string(p.args.Canonical), maxConfirmArguments),
		Text:      fmt.Sprintf("Allow %s to run with these arguments? It is not read-only.", p.name),
		Diff:      pv.Diff, Note: pv.Note, StateHash: pv.StateHash()})
}

func (a *preflightActor) confirmReply(ctx actor.Context, m *messages.ConfirmReply) {
	switch {
	case a.in.cfg.Approver != nil && !a.answered[m.CallId]:
		// The Approver answers this turn's confirmations, not Confirm.
		ctx.Respond(&messages.ConfirmAck{Status: "not_found"})
		return
	case a.asking == nil || a.asking.id != m.CallId || (a.asking.tool.Preview != nil && !a.asking.bound):
		// Not asked (yet: a call with a preview is asked once the preview
		// is shown, and an answer before that answers nothing).
		if a.answered[m.CallId] {
			ctx.Respond(&messages.ConfirmAck{Status: "already_answered"})
		} else {
			ctx.Respond(&messages.ConfirmAck{Status: "not_found"})
		}
		return
	case a.asking.argsHash != m.ArgsHash:
		ctx.Respond(&messages.ConfirmAck{Status: "mismatch"})
		return
	}
	ctx.Respond(&messages.ConfirmAck{Status: "accepted"})
	reason := "denied by the user"
	if m.Reason != "" {
		reason += ": " + messages.ClipText(m.Reason, 500)
	}
	a.decideAsk(ctx, m.Approve, reason)
}

// approverReply settles the pending confirmation with the Approver's
// answer, if it is the answer to that call and those arguments. An answer
// given after the Approver's context ended is never sent: the timer or the
// cancellation settles the call.
func (a *preflightActor) approverReply(ctx actor.Context, m *approverReply) {
	if a.asking == nil || a.asking.id != m.callID || a.asking.argsHash != m.argsHash {
		return
	}
	reason := "denied by the approver"
	if m.reason != "" {
		reason += ": " + messages.ClipText(m.reason, 500)
	}
	a.decideAsk(ctx, m.approve, reason)
}

// decideAsk settles the pending confirmation and goes on with the next call.
func (a *preflightActor) decideAsk(ctx actor.Context, approved bool, reason string) {
	p := a.asking
	a.asking = nil
	a.in.cfg.Observer.ConfirmWait(p.name, approved, time.Since(a.askedAt))
	if a.answered == nil {
		a.answered = map[string]bool{}
	}
	a.answered[p.id] = true
	if a.askTimer != nil {
		a.askTimer.Stop()
		a.askTimer = nil
	}
	if a.askCancel != nil {
		a.askCancel()
		a.askCancel = nil
	}
	if approved {
		a.mutated(p)
	} else {
		delete(a.inTurn, p.dedupKey)
		a.decide(p, toolkit.StatusSkipped, skippedText(reason))
	}
	a.proceed(ctx)
}
