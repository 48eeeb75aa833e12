package actors

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
)

// Messages that never leave the actor system. Each is immutable once sent.

// sessionIdle tells the dispatcher a session has no work; received is how
// many messages it got from the dispatcher, so the dispatcher knows none is
// in flight. The session sends it with Request, so the dispatcher knows the
// sender.
type sessionIdle struct{ received uint64 }

// turnFinished tells the session its current turn is done.
type turnFinished struct {
	pid *actor.PID // the turn actor
	// failed: the commit did not happen; the session's cached state is stale.
	failed bool
}

// releaseState asks a child session actor that is idle for its state,
// which its commit actor hands to the dispatcher (stateReleased) before
// the dispatcher stops the session actor.
type releaseState struct{ session string }

// stateReleased hands a session's state back to the dispatcher: the
// commit actor that sent it keeps none.
type stateReleased struct {
	session string
	state   *sessionState
}

// commit actor requests and replies.
type prepareTurn struct {
	run       string
	turnID    string
	callsHash string // of the turn's calls, when turnID is set
}

// prepared answers a prepareTurn. run is lent to the turn: the commit
// actor keeps no reference to it until commitTurn hands it back (a turn
// that does not commit is followed by a resetState, which forgets it).
type prepared struct {
	next   int64
	run    *cachestore.RunState
	events *eventBlock // the turn's block of sequence numbers
	replay *messages.TurnRecord
	// conflict: turnID names a committed turn with other calls (replay
	// holds it).
	conflict bool
	err      error
}

type writeIntent struct{ intent *cachestore.Intent }

// noteTask tells the pool the task an outside server runs call idx as
// (toolkit.Call.NoteTask); done gets the outcome of its write (buffered).
type noteTask struct {
	idx  int
	id   string
	at   time.Time
	done chan error
}

// writeTask asks the commit actor to write the intent naming a task, and
// to tell done how it went (buffered): the call waits on it, not the pool.
type writeTask struct {
	intent *cachestore.Intent
	done   chan error
}

// commitTurn asks the commit actor to write a turn and hands back the
// run's state the turn was lent (nil for none), to which the commit
// actor applies the turn's changes once they are durable.
type commitTurn struct {
	commit *cachestore.TurnCommit
	run    *cachestore.RunState
}

type storeDone struct{ err error }

// callPlan is the outcome of pass 1 for one call.
type callPlan struct {
	idx      int
	id       string
	name     string // the tool that runs (the inner one for run_tool)
	tool     *toolkit.Tool
	args     toolkit.Args
	argsHash string
	dedupKey string
	// stamp is the tool's Stamp of what the call depends on, taken before
	// it runs; a de-duplication entry is replayed only while it still holds.
	// stamped: it was taken (or the tool has none); stampFailed: taking
	// it panicked, and no entry is replayed for the call.
	stamp       string
	stamped     bool
	stampFailed bool
	readOnly    bool
	// decided is set when pass 1 ended the call.
	decided *messages.ToolMessage
	// dupOf >= 0: an identical earlier call of this turn runs instead.
	dupOf int
	// fetch marks the tool's schema fetched for the run at commit.
	fetch bool
	// fault is what chaos mode injects into the call (usually nothing).
	fault chaos.Decision
	// bound is set when the call asked for approval with a preview of the
	// files it changes (Tool.Preview): the approval holds only while
	// Tool.FileState still returns boundState, the state that preview read.
	bound      bool
	boundState string
	// approval is the deferred approval of a call committed
	// awaiting_approval (confirm defer), written with the turn.
	approval *cachestore.Approval
}

// preflightDone is pass 1's reply to its turn, with the run's state the
// turn lent it.
type preflightDone struct {
	plans []*callPlan
	run   *cachestore.RunState
}

// runCalls asks the pool to run the executable calls of a turn.
type runCalls struct {
	ctx    context.Context
	plans  []*callPlan // executable calls, in call order
	intent *cachestore.Intent
}

// callOutcome is one finished call.
type callOutcome struct {
	idx     int
	msg     *messages.ToolMessage
	fetched []string
	cache   *toolkit.CacheEntry
}

// poolDone is pass 2's reply to its turn, indexed like the turn's calls.
type poolDone struct {
	outcomes map[int]*callOutcome
	err      error
}

func isNotFound(err error) bool { return errors.Is(err, cachestore.ErrNotFound) }
