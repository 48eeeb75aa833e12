package actors

import (
	"errors"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// checkCanceledText is the result of a call whose argument check the
// turn's cancellation stopped.
const checkCanceledText = "not run: the turn was canceled while the call's arguments were checked."

// check validates a call's arguments within its turn: the turn's context
// (a cancellation stops pattern matching) and the turn's pattern-matching
// budget, which the turn's calls share.
func (a *pass1) check(schema *toolkit.Schema, args toolkit.Args) error {
	if a.budget == nil {
		a.budget = a.in.cfg.Registry.Schemas.NewTurnBudget()
	}
	return schema.Check(a.in.turnCtx, args.Value, a.budget)
}

// refuse decides a call whose arguments failed their check: canceled when
// the turn's cancellation stopped the check, invalid_args otherwise.
func (a *pass1) refuse(p *callPlan, err error) verdict {
	if errors.Is(err, toolkit.ErrCheckCanceled) {
		return a.decide(p, toolkit.StatusCanceled, checkCanceledText)
	}
	return a.decide(p, toolkit.StatusInvalidArgs, err.Error())
}
