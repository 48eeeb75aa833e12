package actors

import (
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Deferred approvals (confirm defer, SPEC §16): rule 9 does not wait for
// the answer. The call is committed awaiting_approval with the turn, and
// its Approval record (call id, arguments and their hash, the state its
// preview read, the ceiling it was asked under) is written in the same
// transaction; the turn's other calls go on. An answer, however late and
// on whatever member, is a job of the session (approvalActor).

// deferPreviewTimeout bounds the preview of a call whose approval is
// deferred: the turn waits for it (it binds the approval to the files it
// read), not for the answer.
const deferPreviewTimeout = 30 * time.Second

// answererConfirm names who may answer a deferred approval: whoever may
// call Confirm (the service's confirm API on any member).
const answererConfirm = "confirm"

// awaitingText is the content of a call committed awaiting_approval: what
// the model reads until the answer amends it.
func awaitingText(tool string) string {
	return fmt.Sprintf("%s was not run yet: it changes things and waits for a person's approval, which may take a while. "+
		"Its result will replace this message once someone answers. Do not call it again; go on with what does not depend on it.", tool)
}

// deferApproval ends a call's preflight awaiting_approval with the
// approval it stores, and announces it with a tool_confirm event whose
// status says it does not hold the turn.
func (a *pass1) deferApproval(p *callPlan, pv toolkit.Preview) verdict {
	in := a.in
	p.argsHash = p.args.Hash()
	shown := clipRedacted(in.cfg.Redactor, string(p.args.Canonical), maxConfirmArguments)
	p.approval = &cachestore.Approval{Session: in.session, Run: in.run, Turn: in.turn, CallID: p.id, Tool: p.name,
		Arguments: slices.Clone(p.args.Canonical), ArgsHash: p.argsHash, State: p.boundState, Shown: shown, Diff: pv.Diff, Note: pv.Note,
		Ceiling: in.approve, Answerer: answererConfirm, Asked: in.cfg.Clock().UTC()}
	if in.em.active() {
		in.em.emit(&messages.Event{Kind: EventToolConfirm, CallId: p.id, Tool: p.name, ArgsHash: p.argsHash,
			Status:    string(toolkit.StatusAwaitingApproval),
			Arguments: shown,
			Text: fmt.Sprintf("Allow %s to run with these arguments? It is not read-only. The turn does not wait: "+
				"answer whenever you like.", p.name),
			Diff: pv.Diff, Note: pv.Note, StateHash: pv.StateHash()})
	}
	return a.decide(p, toolkit.StatusAwaitingApproval, awaitingText(p.name))
}

// deferAsked settles the call asked with its preview (bound to the state
// the preview read) awaiting_approval, and goes on with the next call.
func (a *preflightActor) deferAsked(ctx actor.Context, p *callPlan, pv toolkit.Preview) {
	a.asking = nil
	a.stopAsking()
	a.deferApproval(p, pv)
	a.cur = nil // its preflight is over
	a.proceed(ctx)
}

// approvals are the deferred approvals of a turn's calls that are still
// awaiting approval in msgs (the turn's messages, in call order).
func (a *turnActor) approvals(msgs []*messages.ToolMessage) []*cachestore.Approval {
	var out []*cachestore.Approval
	for _, p := range a.plans {
		if p.approval != nil && msgs[p.idx].GetStatus() == string(toolkit.StatusAwaitingApproval) {
			out = append(out, p.approval)
		}
	}
	return out
}
