package actors

import (
	"errors"
	"fmt"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
)

// The rules of pass 1 (SPEC §3), in the order pass1Rules applies them.
// Each looks at one call's plan and what earlier rules of the same call
// left in pass1, and says whether the call goes on (nextRule), is settled
// (callDone) or waits; a rule that settles a call ends it with settle or
// decide.

// rule1Normalise is SPEC §3 rule 1: the call's id and name as Prepare read
// them (trimmed; the name cut at a leaked special token; a missing id made
// up by the pairing rule, messages.CallIDs), announced by tool_call. A
// call beyond the turn's limit, one whose id repeats an earlier call's and
// one that names no tool are refused; each still gets its one result.
func rule1Normalise(a *pass1, p *callPlan) verdict {
	in, pc := a.in, &a.in.parsed[p.idx]
	p.id, p.name = pc.id, pc.name
	repeated := a.seenIDs[p.id]
	a.seenIDs[p.id] = true
	if in.em.active() {
		in.em.emit(&messages.Event{Kind: EventToolCall, CallId: p.id, Tool: p.name,
			Arguments: in.em.clip(in.calls[p.idx].GetFunction().GetArguments(), maxEventArguments)})
	}
	switch {
	case p.idx >= in.cfg.MaxCallsPerTurn:
		return a.decide(p, toolkit.StatusInvalidArgs, fmt.Sprintf("not run: this turn has %d calls and at most %d are dispatched per turn; split the work over several turns.",
			len(in.calls), in.cfg.MaxCallsPerTurn))
	case repeated:
		return a.decide(p, toolkit.StatusInvalidArgs, fmt.Sprintf("not run: call id %q repeats an earlier call's id in this turn; every call needs its own id.",
			messages.ClipText(p.id, 80)))
	case p.name == "":
		return a.decide(p, toolkit.StatusUnknownTool, "not run: the call names no tool. Use find_tools to search the available tools.")
	}
	return nextRule
}

// rule2Parse is SPEC §3 rule 2: the arguments as Prepare parsed them, once,
// strictly, under Config.Limits, into their canonical form; arguments that
// did not parse are refused.
func rule2Parse(a *pass1, p *callPlan) verdict {
	pc := &a.in.parsed[p.idx]
	if pc.err != nil {
		return a.decide(p, toolkit.StatusInvalidArgs, "not run: "+pc.err.Error())
	}
	p.args = pc.args
	return nextRule
}

// rule3UnwrapRunTool is SPEC §3 rule 3: run_tool{name, arguments} becomes a
// call of name with those arguments, which every later rule sees; run_tool
// inside run_tool is refused.
func rule3UnwrapRunTool(a *pass1, p *callPlan) verdict {
	if p.name != toolkit.RunToolName {
		return nextRule
	}
	in, args := a.in, p.args
	if rt, ok := in.view.Lookup(toolkit.RunToolName); ok {
		var err error
		if args, err = in.view.StrictArgs(rt, args, in.cfg.Limits); err != nil {
			return a.decide(p, toolkit.StatusInvalidArgs, "not run: "+err.Error())
		}
	}
	name, inner, err := toolkit.UnwrapRunTool(args, in.cfg.Limits)
	if err != nil {
		return a.decide(p, toolkit.StatusInvalidArgs, "not run: "+err.Error())
	}
	p.name, p.args, a.viaRunTool = name, inner, true
	return nextRule
}

// rule4Existence is SPEC §3 rule 4: a name with no tool in the run's view
// (none registered, or the run excludes it) never executes. It also reads
// the arguments as the tool's tools format means them (in a strict format
// a null for an optional property means absent) and compiles the tool's
// full schema for the rules after it.
func rule4Existence(a *pass1, p *callPlan) verdict {
	in := a.in
	tool, ok := in.view.Lookup(p.name)
	if !ok {
		return a.decide(p, toolkit.StatusUnknownTool, unknownToolText(p.name, in.view))
	}
	p.tool = tool
	args, err := in.view.StrictArgs(tool, p.args, in.cfg.Limits)
	if err != nil {
		return a.decide(p, toolkit.StatusInvalidArgs, "not run: "+err.Error())
	}
	p.args = args
	if a.schema, err = in.cfg.Registry.Schemas.Compile(tool.Schema); err != nil {
		return a.decide(p, toolkit.StatusError, "not run: the tool's schema does not compile: "+err.Error())
	}
	return nextRule
}

// rule4ClientTool ends a call of a client tool after existence (SPEC §10):
// it is validated (rule 7) and ends client_pending, with no schema
// handshake, de-duplication or gate; the caller runs it.
func rule4ClientTool(a *pass1, p *callPlan) verdict {
	if !a.in.view.IsClient(p.name) {
		return nextRule
	}
	if err := a.check(a.schema, p.args); err != nil {
		return a.refuse(p, err)
	}
	return a.decide(p, toolkit.StatusClientPending, "client tool: the caller runs this call and hands its result back.")
}

// rule5Deferred is SPEC §3 rule 5: under ArrayLazy, a direct call (not
// through run_tool) of a tool outside the tools array (not a core tool,
// not AlwaysInArray) is refused, with the way to reach it.
func rule5Deferred(a *pass1, p *callPlan) verdict {
	v := a.in.view
	if v.Policy() == toolkit.ArrayLazy && !a.viaRunTool && !v.InArray(p.name) {
		return a.decide(p, toolkit.StatusDeferred, deferredText(p.name))
	}
	return nextRule
}

// rule6SchemaHandshake is SPEC §3 rule 6: a tool whose schema the model has
// not fetched in this run does not execute: its schema comes back, and it
// is marked fetched. With AutoLoadSchemas a call whose arguments already
// validate runs at once. The validation made here is rule 7's.
func rule6SchemaHandshake(a *pass1, p *callPlan) verdict {
	a.verr = a.check(a.schema, p.args)
	if errors.Is(a.verr, toolkit.ErrCheckCanceled) {
		return a.refuse(p, a.verr)
	}
	if a.in.view.StartsFetched(p.name) || a.runState.Fetched[p.name] || a.loaded[p.name] {
		return nextRule
	}
	p.fetch = true
	if !a.in.autoLoad || a.verr != nil {
		return a.decide(p, toolkit.StatusSchemaReturned, schemaReturnedText(p.tool, a.verr))
	}
	// Loaded: later calls of the tool in this turn are validated like
	// calls of a fetched tool.
	if a.loaded == nil {
		a.loaded = map[string]bool{}
	}
	a.loaded[p.name] = true
	return nextRule
}

// rule7Validation is SPEC §3 rule 7: arguments that fail the tool's full
// JSON Schema are refused, naming each failing field.
func rule7Validation(a *pass1, p *callPlan) verdict {
	if a.verr != nil {
		return a.decide(p, toolkit.StatusInvalidArgs, a.verr.Error())
	}
	return nextRule
}

// rule8Stamp is the first half of SPEC §3 rule 8: a tool with a Stamp has
// the state of what the call depends on (its files) recorded before it
// runs, and a de-duplication entry stands only while that state does. The
// call waits for its stamp, which the preflight actor takes on a goroutine
// of its own (it opens and hashes files) and then runs this rule again.
func rule8Stamp(a *pass1, p *callPlan) verdict {
	if p.stamped || p.tool.NoDedup || p.tool.Stamp == nil {
		return nextRule
	}
	return waitStamp
}

// rule8Dedup is SPEC §3 rule 8: a repeat of a call that succeeded earlier
// in the run (same tool, same canonical arguments, same stamp) is answered
// deduped without running; within the turn, a call identical to an
// earlier one follows it (it runs once). A call registered here as the
// first of its kind is taken back by settle if a later rule ends it.
func rule8Dedup(a *pass1, p *callPlan) verdict {
	if p.tool.NoDedup {
		return nextRule
	}
	p.dedupKey = toolkit.DedupKey(p.name, p.args)
	if e, ok := a.runState.Dedup[p.dedupKey]; ok && !a.invalid[p.dedupKey] && !p.stampFailed && e.Stamp == p.stamp {
		return a.decide(p, toolkit.StatusDeduped, e.Content)
	}
	if first, ok := a.inTurn[p.dedupKey]; ok {
		p.dupOf = first.idx
		a.in.em.call(EventToolDeduped, p.id, p.name)
		return callDone
	}
	a.inTurn[p.dedupKey] = p
	return nextRule
}

// rule9ConfirmGate is SPEC §3 rule 9: a call that is not read-only (by its
// tool's policy, which may read the arguments) runs under approve all, is
// skipped under none, with nobody to ask or once the turn is canceled, and
// otherwise waits for a confirmation. Chaos mode decides the call's fault
// here: a denial is injected only into a call that would ask.
func rule9ConfirmGate(a *pass1, p *callPlan) verdict {
	in := a.in
	p.readOnly = p.tool.IsReadOnly(p.args)
	p.fault = in.chaos.Decide(in.run, in.turn, p.idx, p.name)
	denied := p.fault.Injected() && p.fault.Fault.Kind == chaos.KindDeny
	switch {
	case p.readOnly:
		if denied {
			p.fault = chaos.Decision{} // only calls that ask can be denied
		}
		return callDone
	case denied:
		m := toolMsg(p, toolkit.StatusSkipped, skippedText(p.fault.Replacement(0)))
		m.Injected = p.fault.Label()
		return a.settle(p, m)
	case in.approve == ApproveAll:
		a.mutated(p)
		return callDone
	case in.approve != ApproveAsk:
		return a.skip(p, notApprovedText(&in.cfg.Config))
	case in.deferAsk && a.canceled:
		return a.skip(p, "the turn was canceled")
	case in.deferAsk && p.tool.Preview == nil:
		return a.deferApproval(p, toolkit.Preview{})
	case in.deferAsk:
		return waitConfirm // for its preview, which binds the approval
	case in.cfg.Approver == nil && !in.em.active():
		return a.skip(p, "nobody is listening for confirmations")
	case a.canceled:
		return a.skip(p, "the turn was canceled")
	}
	return waitConfirm
}
