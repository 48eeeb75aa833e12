package actors

import (
	"strings"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// A tool_confirm shows the person its turn: the model's own text of the
// assistant message (why it asks for these calls) and the calls after the
// one asked, which are checked, and asked if they need it, only once it is
// answered (confirmations are asked one at a time, in call order). What
// the upcoming calls will get is not decided here: Asks is a look ahead
// (the tool is not read-only for these arguments), not a plan.

// Bounds of what a tool_confirm shows of its turn, after redaction.
const (
	maxTurnText          = 4096
	maxUpcoming          = 16
	maxUpcomingArguments = 2048
)

// turnText is the model's text of the turn as a tool_confirm shows it.
func (a *preflightActor) turnText() string {
	return a.in.em.clip(strings.TrimSpace(a.in.text), maxTurnText)
}

// upcoming lists the turn's calls after the one being asked (the first
// maxUpcoming of them), as far as they can be read without checking them:
// the id and name they will get, their arguments (run_tool unwrapped),
// and whether they would ask.
func (a *preflightActor) upcoming() []*messages.UpcomingCall {
	rest := a.in.calls[a.next:]
	out := make([]*messages.UpcomingCall, 0, min(len(rest), maxUpcoming))
	for i, tc := range rest[:min(len(rest), maxUpcoming)] {
		pc := a.in.parsed[a.next+i] // rules 1 and 2 as Prepare read them
		u := &messages.UpcomingCall{CallId: pc.id, Tool: pc.name}
		raw := tc.GetFunction().GetArguments()
		if args := pc.args; pc.err == nil && args.Canonical != nil {
			if u.Tool == toolkit.RunToolName {
				if name, inner, err := toolkit.UnwrapRunTool(args, a.in.cfg.Limits); err == nil {
					u.Tool, args = name, inner
				}
			}
			raw = string(args.Canonical)
			if t, ok := a.in.view.Lookup(u.Tool); ok && a.in.approve == ApproveAsk && !a.in.view.IsClient(u.Tool) {
				u.Asks = !t.IsReadOnly(args)
			}
		}
		u.Arguments = a.in.em.clip(raw, maxUpcomingArguments)
		out = append(out, u)
	}
	return out
}
