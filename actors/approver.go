package actors

import (
	"context"
	"fmt"
)

// ApprovalRequest is what an Approver is asked about one call that is not
// read-only, in a turn whose approve policy is "ask".
type ApprovalRequest struct {
	Session string
	Run     string
	Turn    int64
	CallID  string
	Tool    string
	// Args are the call's canonical arguments: exactly what runs if the call
	// is approved (a copy: changing it changes nothing).
	Args []byte
	// ArgsHash is the hash of Args the answer is bound to, as in a
	// tool_confirm event.
	ArgsHash string
	// Diff and Note preview a call that changes workspace files: what it
	// would do to them as they were when it was asked (a unified diff, or
	// a note saying why there is none, e.g. that the call will fail), and
	// StateHash is the hash of the state of the files that preview read.
	// An approval holds only while the files stay in that state: if they
	// changed when the call's turn to run comes (an earlier call of the
	// turn, or anything else, changed them), the call does not run and
	// ends skipped. Empty for other calls. Like every event text, they are
	// redacted (Config.Redactor) before they are cut.
	Diff      string
	Note      string
	StateHash string
}

// Approver decides whether a call that is not read-only may run; reason
// goes into the skipped call's text when it is denied.
//
// It is called on a goroutine of its own, never on an actor's, one call at a
// time per turn and in call order (SPEC §3 rule 9), so it may block: on a
// human, on a policy service, on anything else. ctx ends when the
// confirmation times out (Config.ConfirmTimeout) or the turn is canceled;
// the call is then skipped whatever the Approver answers later, so it should
// return when ctx ends. An Approver that panics denies. The answer is bound
// to the call id and ArgsHash and used once.
//
// It is only ever asked within the policy ceiling: a turn whose approve is
// "all" runs such calls without asking, and one whose approve is "none"
// (or is lowered to none by Config.MaxApprove) skips them without asking.
type Approver func(ctx context.Context, req ApprovalRequest) (approve bool, reason string)

// approverReply is an Approver's answer, piped back to the preflight actor.
type approverReply struct {
	callID   string
	argsHash string
	approve  bool
	reason   string
}

// askApprover runs the approver and returns its answer as a message; a
// panic denies. It returns nil when ctx ended first: the preflight actor has
// settled the call already (timeout, cancellation) or is stopping, and an
// answer given after that is no answer.
func askApprover(ctx context.Context, ap Approver, req ApprovalRequest) (r *approverReply) {
	r = &approverReply{callID: req.CallID, argsHash: req.ArgsHash}
	defer func() {
		if v := recover(); v != nil {
			r.approve, r.reason = false, fmt.Sprintf("the approver failed: %v", v)
		}
		if ctx.Err() != nil {
			r = nil
		}
	}()
	r.approve, r.reason = ap(ctx, req)
	return r
}
