package actors

import (
	"errors"
	"slices"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Policy is a ceiling over turns (SPEC §16): the most approval a turn gets
// and the tools no turn may call. A turn may narrow it, never widen it.
//
// A dispatcher's own policy is Config.MaxApprove and Config.Exclude. A
// caller that serves turns under a narrower policy of its own (the HTTP
// service, whose operator sets one) passes it to Dispatcher.PrepareWith.
// Either way a turn's policy is settled once, when it is prepared: its
// approve is lowered to every ceiling (a turn that names none gets none),
// and its exclusions are the dispatcher's, the caller's and its own. The
// prepared turn carries the result (Prepared.Approve, and the approve and
// exclude of Prepared.Turn), and nothing after Prepare applies a policy
// again.
type Policy struct {
	// MaxApprove is the most approval a turn gets: ask, all or none; ""
	// sets no ceiling beyond the dispatcher's.
	MaxApprove string
	// Exclude lists tools no turn may call, whatever its own exclude says.
	Exclude []string
}

// Validate names the first bad field.
func (p Policy) Validate() error {
	switch p.MaxApprove {
	case "", ApproveAsk, ApproveAll, ApproveNone:
		return nil
	}
	return errors.New("actors: Policy.MaxApprove must be ask, all or none")
}

// settle returns the approval and the exclusions turn t gets under the
// dispatcher's policy and the caller's narrower one, and whether a ceiling
// lowered the approval the turn asked for. It is the one place a turn's
// policy is applied (see Policy); the names are merged without repeats,
// so settling a turn that was settled already (one that comes from
// another member) changes nothing.
func (cfg *shared) settle(narrow Policy, t *messages.DispatchTurn) (approve string, exclude []string, lowered bool) {
	approve, lowered = cfg.approval(narrow, t.GetApprove())
	return approve, mergeNames(cfg.Exclude, narrow.Exclude, t.GetExclude()), lowered
}

// approval is the approval a turn that asks for asked gets under the
// dispatcher's ceiling and narrow's (none when it asks for none), and
// whether a ceiling made it lower than asked.
func (cfg *shared) approval(narrow Policy, asked string) (approve string, lowered bool) {
	approve = LowerApproval(asked, cfg.MaxApprove)
	if narrow.MaxApprove != "" {
		approve = LowerApproval(approve, narrow.MaxApprove)
	}
	if approve == "" {
		approve = ApproveNone
	}
	return approve, approvalLowered(asked, approve)
}

// mergeNames returns the names of every list, each once, in order of first
// appearance. A single non-empty list comes back as it is.
func mergeNames(lists ...[]string) []string {
	var only []string
	n := 0
	for _, l := range lists {
		if len(l) != 0 {
			only = l
			n++
		}
	}
	if n < 2 {
		return only
	}
	var out []string
	seen := map[string]bool{}
	for _, l := range lists {
		for _, name := range l {
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	return out
}

// answerRefusal is why the dispatcher's policy no longer lets an approved
// deferred call of tool run, asked under ceiling (the turn's settled
// approve), or "" when it does. An approval outlives the process that
// asked it: the policy of the process that answers is asked again, by the
// same rules settle applies to a turn (approval lowered to every ceiling,
// exclusions merged), so an operator who restarted with a lower ceiling
// (none) or with the tool excluded has the call skipped, as a turn asking
// it now would be.
func (cfg *shared) answerRefusal(ceiling, tool string) string {
	if approve, _ := cfg.approval(Policy{}, ceiling); approve == ApproveNone {
		return notApprovedText(&cfg.Config)
	}
	if slices.Contains(mergeNames(cfg.Exclude), tool) {
		return "the operator excluded " + tool + " after the call asked"
	}
	return ""
}
