package actors

import (
	"fmt"

	"github.com/tooldispatch/tooldispatch/messages"
)

// EventPolicyLowered is the first event of a turn whose approval a ceiling
// made lower than the turn asked for (SPEC §16: a turn may lower the
// operator's approval, never raise it). It carries the approval asked for
// and the one applied, so the caller learns at once why its calls are
// asked, or skipped, instead of approved.
const EventPolicyLowered = "policy_lowered"

// approvalLowered reports whether applied is a lower approval than asked
// (all to ask, or ask or all to none); "" asks for nothing.
func approvalLowered(asked, applied string) bool {
	return asked != "" && approvalRank(applied) < approvalRank(asked)
}

// policyLoweredEvent says that the turn asked for approval asked and got
// applied.
func policyLoweredEvent(asked, applied string) *messages.Event {
	what := "its calls that change things are asked before they run"
	if applied == ApproveNone {
		what = "its calls that change things are skipped"
	}
	return &messages.Event{Kind: EventPolicyLowered, ApproveAsked: asked, ApproveApplied: applied,
		Text: fmt.Sprintf("this turn asked for approve %q; the most it may get here is %q: %s", asked, applied, what)}
}
