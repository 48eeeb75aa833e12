package service

// ApproveLoweredHeader is set on the reply to a turn (its event stream or
// its JSON) whose body asked for more approval than the server's ceiling
// (--approve) gives: "asked->applied", like "all->ask". The turn's events
// start with a policy_lowered event that says the same.
const ApproveLoweredHeader = "Tooldispatch-Approve-Lowered"
