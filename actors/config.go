package actors

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
)

// Defaults filled in by Config.withDefaults.
const (
	defaultConfirmTimeout = 5 * time.Minute
	defaultSessionIdle    = 2 * time.Minute
	defaultCancelGrace    = 2 * time.Second
	defaultWatchdogGrace  = time.Second
	defaultMaxCalls       = 4096
	// DefaultMaxTurnBytes bounds the arguments of one turn, all calls
	// together (each call has its own 1 MiB limit), when
	// Config.MaxTurnBytes is zero: a turn is held in memory several times
	// over (request, intent, record, store transaction).
	DefaultMaxTurnBytes = 64 << 20
	// maxMaxTurnBytes is the largest Config.MaxTurnBytes: a turn's record
	// (arguments and results) must stay far below the 1 GB PostgreSQL
	// takes in one value.
	maxMaxTurnBytes = 256 << 20
	// encodingOverhead is what EncodedTurnLimit adds for the envelope
	// around the arguments (ids, names, session, client tools' schemas).
	encodingOverhead = 1 << 20
	// RequestTimeout bounds how long an API call waits for the actor system
	// (here and in a cluster's router); turns end far sooner (each call has
	// its own timeout).
	RequestTimeout = 24 * time.Hour
	// storeTimeout bounds one store operation requested by an actor.
	storeTimeout = 2 * time.Minute
)

// EncodedTurnLimit is the most bytes a turn may take where it is read as
// JSON (a value of run input, a request body of the service): the turn
// limit plus 1 MiB of envelope (ids, names, session, client tools). The
// arguments count there as encoded, escapes included; a larger body is
// refused before it is decoded, and a turn within it whose arguments total
// more than maxTurnBytes by the dispatcher's own check.
func EncodedTurnLimit(maxTurnBytes int) int64 {
	return int64(maxTurnBytes) + encodingOverhead
}

// Approval policies of a run (DispatchTurn.approve).
const (
	ApproveAsk  = "ask"
	ApproveAll  = "all"
	ApproveNone = "none"
)

// How a call that needs approval waits (DispatchTurn.confirm).
const (
	// ConfirmBlock: the turn waits for the answer, up to ConfirmTimeout.
	ConfirmBlock = "block"
	// ConfirmDefer: the call is committed awaiting_approval at once and
	// the turn goes on; an answer given later (Dispatcher.Confirm, on any
	// member, after restarts) runs or skips it.
	ConfirmDefer = "defer"
)

// LowerApproval returns the narrower of two approval policies: none is
// narrower than ask, ask than all; "" counts as none. The operator's policy
// is a ceiling (SPEC §16): Prepare lowers a turn's approve to every
// ceiling with it (see Policy).
func LowerApproval(a, b string) string {
	if approvalRank(a) <= approvalRank(b) {
		return a
	}
	return b
}

func approvalRank(a string) int {
	switch a {
	case ApproveAll:
		return 2
	case ApproveAsk:
		return 1
	}
	return 0
}

// ApproveHints are what a call skipped for want of approval tells to set
// (Config.ApproveHints).
type ApproveHints struct {
	// Turn is the hint when the turn's own approval is none (or unset).
	Turn string
	// Ceiling is the hint when the operator's ceiling (MaxApprove) is none.
	Ceiling string
}

// The hints of the Go API (Config.ApproveHints).
const (
	defaultTurnHint = `set the turn's Approve: "ask" (answered by Config.Approver, or by Confirm after a tool_confirm event) or "all"`
	// defaultCeilingHint follows "the most any turn gets is none: ".
	defaultCeilingHint = `Config.MaxApprove is "none"; raise it to "ask" or "all"`
)

// Config configures a dispatcher. Registry and Store are required.
//
// Which registered tools a model sees directly is the turn's choice, by its
// provider field (toolkit.ArrayPolicy): under the default, toolkit.ArrayLazy
// (provider "openai", "lazy", any other name or none), an embedder's own tool
// is not in the tools array and a direct call of it comes back deferred;
// the model reaches it through find_tools and run_tool. Mark the tool
// toolkit.Tool.AlwaysInArray to have it listed and called directly, or
// send provider "all" (alias "claude-code") to list every tool, each one's
// schema then handed over by its first call unless the turn sets
// AutoLoadSchemas.
type Config struct {
	Registry *toolkit.Registry
	Store    cachestore.SessionStore
	// Logger receives the dispatcher's logs (never argument values of
	// secrets). Default: zerolog.Nop().
	Logger zerolog.Logger
	// MaxConcurrency limits how many concurrent tools of one turn run at once.
	// Default: half the CPU cores, at least 3.
	MaxConcurrency int
	// Events receives every event, stamped in order. It is an observer: it
	// is called on the dispatcher's actor goroutines, while they wait for
	// it, so it must return quickly, must not block (hand work to a channel
	// or goroutine of your own) and must not call back into the Dispatcher
	// synchronously (Confirm, Answer, Dispatch, Close from inside Events can
	// deadlock). When nil, no events are produced.
	//
	// Without an Approver, a call that needs approval in a run whose policy
	// is "ask" is announced by a tool_confirm event, to be answered with
	// Dispatcher.Confirm from another goroutine; with neither Events nor an
	// Approver nobody can be asked and such calls are skipped.
	Events func(*messages.Event)
	// Approver, when set, answers every confirmation of a run whose policy
	// is "ask", on a goroutine of its own (see Approver); no tool_confirm
	// events are sent and Confirm is not used for them. Nil: the
	// tool_confirm event and Confirm.
	Approver Approver
	// NobodyAnswers: no person answers this dispatcher's questions
	// (tooldispatch run, or a service with no route for answers): a
	// question a call asks (ask_user, store_secret, an MCP server's
	// request for input) fails at once with toolkit.ErrNobodyToAsk
	// instead of waiting; a request for input is still announced by its
	// elicitation event, marked declined. A call run after its turn has
	// ended (an approved deferred call) is treated so whatever this says.
	NobodyAnswers bool
	// ConfirmTimeout is how long a confirmation waits for an answer.
	ConfirmTimeout time.Duration
	// SessionIdle is how long a session without work keeps its loaded
	// state (next turn, runs' de-duplication tables) in memory before it
	// is passivated: dropped, and loaded from the store by its next
	// request. Its actors stop as soon as it has no work; a cluster's
	// session grain stops after SessionIdle.
	SessionIdle time.Duration
	// CancelGrace is how long a canceled call may take to return before its
	// slot is freed and it is reported canceled.
	CancelGrace time.Duration
	// WatchdogGrace is added to a tool's timeout before a call that ignores
	// its context is abandoned and reported timeout.
	WatchdogGrace time.Duration
	// Limits bound the arguments of one call.
	Limits toolkit.Limits
	// MaxCallsPerTurn: calls beyond it are refused with invalid_args.
	MaxCallsPerTurn int
	// MaxTurnBytes bounds the arguments of one turn, all calls together: a
	// larger turn is refused before anything runs (ErrBadRequest), whatever
	// the route (run input, the service, a cluster member, the Go API).
	// The routes that read a turn as JSON take at most
	// EncodedTurnLimit(MaxTurnBytes) bytes of it. Default
	// DefaultMaxTurnBytes (64 MiB), at most 256 MiB.
	MaxTurnBytes int
	// Clock gives the time of events and records. Default time.Now.
	Clock func() time.Time
	// Observer receives measurements. Default toolkit.NopObserver.
	Observer toolkit.Observer
	// Redactor, when set, takes secret values out of every tool message's
	// content and every event's text before they leave the dispatcher
	// (secrets.Redactor is one). It is also handed to every call
	// (toolkit.Call.Redactor), so that a tool redacts its output before it
	// cuts it; a call's streamed text is redacted across its pieces, and
	// every text the dispatcher cuts is redacted whole first.
	Redactor toolkit.Redactor
	// PastFixes, when set, returns up to three lines describing recorded
	// fixes of errors like this one (error memory) that the call's session
	// may read; they are added to a failed call's text, marked as quoted
	// notes, before its next: line. It runs on the call's actor.
	PastFixes func(ctx context.Context, session, tool, errText string) []string

	// MaxApprove is the most any turn gets (SPEC §16): a turn's approve is
	// lowered to it, never the other way, once, when the turn is prepared
	// (see Policy). Default (""): ApproveAll, the turn decides.
	MaxApprove string
	// ApproveHints say, in the message of a call skipped because its
	// approval is none, what to set to let such calls be asked or run, in
	// the terms of the program that sends turns. Empty fields name this
	// package's own fields (DispatchTurn.Approve, Config.MaxApprove).
	ApproveHints ApproveHints
	// Exclude lists tools no turn may call, whatever the turn's own
	// exclude list says; they are unknown_tool to every turn.
	Exclude []string
	// Confirm is how calls that need approval wait in turns that do not
	// say (DispatchTurn.confirm): ConfirmBlock (the default, "") or
	// ConfirmDefer. A deferred call is answered through Confirm, never by
	// the Approver (which answers only calls whose turn waits).
	Confirm string

	// MaxWaitingApprovals caps the deferred approvals the store keeps
	// waiting, every session's together (beside the 64 one session may
	// keep): a call that would wait past it is committed skipped, saying
	// why, with the rest of its turn, and nothing of it is kept waiting.
	// Default cachestore.DefaultMaxWaiting (100 000).
	MaxWaitingApprovals int64

	// Chaos is the chaos-mode policy of runs whose turns bring none; nil
	// (the default) injects nothing.
	Chaos *chaos.Policy

	// Tracer, when set, traces every turn (OpenTelemetry): a span per
	// Dispatch, per turn, per pass and per call that runs (actors/trace.go).
	// nil, the default, traces nothing and costs nothing; the caller's
	// trace context is still passed on to the session's member.
	Tracer trace.Tracer
}

// DefaultConfirmTimeout is how long a confirmation waits for an answer
// when Config.ConfirmTimeout is zero.
const DefaultConfirmTimeout = defaultConfirmTimeout

// DefaultMaxConcurrency is half the CPU cores, at least 3.
func DefaultMaxConcurrency() int { return max(3, runtime.NumCPU()/2) }

// Validate names the first bad field.
func (c *Config) Validate() error {
	switch {
	case c.Registry == nil:
		return errors.New("actors: Config.Registry is required")
	case c.Store == nil:
		return errors.New("actors: Config.Store is required")
	case c.MaxConcurrency < 0:
		return errors.New("actors: Config.MaxConcurrency must not be negative")
	case c.MaxApprove != "" && c.MaxApprove != ApproveAll && c.MaxApprove != ApproveAsk && c.MaxApprove != ApproveNone:
		return errors.New("actors: Config.MaxApprove must be ask, all or none")
	case c.Confirm != "" && c.Confirm != ConfirmBlock && c.Confirm != ConfirmDefer:
		return errors.New("actors: Config.Confirm must be block or defer")
	case c.ConfirmTimeout < 0, c.SessionIdle < 0, c.CancelGrace < 0, c.WatchdogGrace < 0:
		return errors.New("actors: Config durations must not be negative")
	case c.MaxWaitingApprovals < 0:
		return errors.New("actors: Config.MaxWaitingApprovals must not be negative")
	case c.MaxTurnBytes < 0 || c.MaxTurnBytes > maxMaxTurnBytes:
		return fmt.Errorf("actors: Config.MaxTurnBytes must be between 0 (the default, %d) and %d, got %d", DefaultMaxTurnBytes, maxMaxTurnBytes, c.MaxTurnBytes)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = DefaultMaxConcurrency()
	}
	if c.ConfirmTimeout == 0 {
		c.ConfirmTimeout = defaultConfirmTimeout
	}
	if c.SessionIdle == 0 {
		c.SessionIdle = defaultSessionIdle
	}
	if c.CancelGrace == 0 {
		c.CancelGrace = defaultCancelGrace
	}
	if c.WatchdogGrace == 0 {
		c.WatchdogGrace = defaultWatchdogGrace
	}
	if c.MaxApprove == "" {
		c.MaxApprove = ApproveAll
	}
	if c.ApproveHints.Turn == "" {
		c.ApproveHints.Turn = defaultTurnHint
	}
	if c.ApproveHints.Ceiling == "" {
		c.ApproveHints.Ceiling = defaultCeilingHint
	}
	if c.MaxCallsPerTurn == 0 {
		c.MaxCallsPerTurn = defaultMaxCalls
	}
	if c.MaxTurnBytes == 0 {
		c.MaxTurnBytes = DefaultMaxTurnBytes
	}
	if c.MaxWaitingApprovals == 0 {
		c.MaxWaitingApprovals = cachestore.DefaultMaxWaiting
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Observer == nil {
		c.Observer = toolkit.NopObserver{}
	}
	return c
}
