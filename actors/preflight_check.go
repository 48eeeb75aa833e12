package actors

import (
	"context"
	"errors"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// checkCanceledText is the result of a call whose argument check the
// turn's cancellation stopped.
const checkCanceledText = "not run: the turn was canceled while the call's arguments were checked."

// check validates a call's arguments within its turn: the turn's context
// (a cancellation stops pattern matching) and the turn's pattern-matching
// budget, which the turn's calls share.
func (a *preflightActor) check(schema *toolkit.Schema, args toolkit.Args) error {
	if a.budget == nil {
		a.budget = a.in.cfg.Registry.Schemas.NewTurnBudget()
	}
	ctx := a.in.turnCtx
	if ctx == nil {
		ctx = context.Background()
	}
	return schema.Check(ctx, args.Value, a.budget)
}

// refuse decides a call whose arguments failed their check: canceled when
// the turn's cancellation stopped the check, invalid_args otherwise.
func (a *preflightActor) refuse(p *callPlan, err error) *callPlan {
	if errors.Is(err, toolkit.ErrCheckCanceled) {
		return a.decide(p, toolkit.StatusCanceled, checkCanceledText)
	}
	return a.decide(p, toolkit.StatusInvalidArgs, err.Error())
}
