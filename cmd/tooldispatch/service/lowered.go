package service

import (
	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/messages"
)

// ApproveLoweredHeader is set on the reply to a turn (its event stream or
// its JSON) whose body asked for more approval than the server's ceiling
// (--approve) gives: "asked->applied", like "all->ask". The turn's events
// start with a policy_lowered event that says the same.
const ApproveLoweredHeader = "Tooldispatch-Approve-Lowered"

// ApprovalLowered reports whether the ceiling lowered the approval the
// turn's body asked for.
func ApprovalLowered(dt *messages.DispatchTurn) bool {
	return actors.ApprovalLowered(dt.GetApproveAsked(), dt.GetApprove())
}
