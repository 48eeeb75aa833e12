package actors

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Sentinel errors of the API.
var (
	// ErrClosed: the dispatcher is shutting down or closed.
	ErrClosed = errors.New("actors: dispatcher closed")
	// ErrBadRequest: the request itself is malformed (no session id, no message).
	ErrBadRequest = errors.New("actors: bad request")
	// ErrTurnIDConflict: the turn's turn_id is already committed with other
	// calls; nothing ran.
	ErrTurnIDConflict = errors.New("actors: turn id already used with other calls")
	// ErrMemberLeft: the cluster member running the turn left the cluster
	// before it answered (a partition, a crash). Calls that may have
	// started read outcome_unknown once the session is loaded again; the
	// turn may be sent again with its turn_id.
	ErrMemberLeft = errors.New("the cluster member running the turn left the cluster; calls that may have started read outcome_unknown once the session is loaded again")
	// ErrNoHost: no cluster member could host the session's grain (its
	// owner was restarting or leaving while every lookup ran); the turn
	// reached no grain and nothing ran. It may be sent again at once.
	ErrNoHost = errors.New("no cluster member could host the session now; nothing ran, send the turn again")
)

// Dispatcher is the Go API of a dispatcher. Safe for concurrent use.
type Dispatcher struct {
	// immutable after start
	root   *actor.RootContext
	pid    *actor.PID // the dispatcher actor; nil when the router hosts sessions itself
	cfg    *shared
	router Router
	system *actor.ActorSystem // set when the dispatcher owns its system
	// idPrefix makes this dispatcher's request ids unique among the
	// dispatchers that may send to one session (cluster members).
	idPrefix string

	nextID   atomic.Uint64
	closing  atomic.Bool
	inflight sync.WaitGroup

	mu      sync.Mutex
	cancels map[uint64]func() // guarded by mu: running Dispatch calls, by Prepared.seq
}

// New starts a dispatcher in an actor system of its own; Close stops both.
func New(cfg Config) (*Dispatcher, error) {
	sys := NewActorSystem(cfg.Logger)
	d, err := Spawn(sys.Root, cfg)
	if err != nil {
		sys.Shutdown()
		return nil, err
	}
	d.system = sys
	return d, nil
}

// Spawn starts a dispatcher actor inside the caller's actor system.
func Spawn(root *actor.RootContext, cfg Config) (*Dispatcher, error) {
	sh, err := cfg.start()
	if err != nil {
		return nil, err
	}
	props := sh.props(func() actor.Actor { return newDispatcherActor(sh) },
		actor.WithSupervisor(sessionSupervisor))
	pid := root.SpawnPrefix(props, "tooldispatch")
	return newDispatcher(root, sh, &localRouter{root: root, pid: pid}, pid), nil
}

// NewRouted starts a dispatcher in sys whose requests go through the router
// route returns; Close closes the router, then shuts sys down. route gets
// the props of session actors for a router that hosts them itself (a
// cluster member registers them as its grain kind). Such an actor learns
// its session from the first request it gets, reloads the session from
// cfg.Store, stops itself when idle for cfg.SessionIdle, and answers a
// request that reaches it while it stops with *actor.DeadLetterResponse
// (nothing was taken: ask again). Its turn results name sys's address as
// the member.
func NewRouted(sys *actor.ActorSystem, cfg Config, route func(sessions *actor.Props) (Router, error)) (*Dispatcher, error) {
	sh, err := cfg.start()
	if err != nil {
		return nil, err
	}
	sh.member = true
	sh.drain = newDrainBoard()
	props := sh.props(func() actor.Actor { return newHostedSession(sh) },
		actor.WithSupervisor(sessionSupervisor), actor.WithReceiverMiddleware(deferRebalance))
	r, err := route(props)
	if err != nil {
		return nil, err
	}
	d := newDispatcher(sys.Root, sh, r, nil)
	d.system = sys
	return d, nil
}

func newDispatcher(root *actor.RootContext, cfg *shared, r Router, pid *actor.PID) *Dispatcher {
	return &Dispatcher{root: root, pid: pid, cfg: cfg, router: r, cancels: map[uint64]func(){},
		idPrefix: rand.Text()[:12] + "/"}
}

// PID is the dispatcher actor, for callers that talk to it with messages:
// it accepts the session protocol (see Router): *messages.DispatchTurn
// (reply *messages.TurnResult; the turn is prepared, under Config's
// policy, when it reaches its session), *messages.ConfirmReply (reply
// *messages.ConfirmAck) and the others. Nil for a dispatcher from
// NewRouted.
func (d *Dispatcher) PID() *actor.PID { return d.pid }

// Member is the address of the cluster member ("" for a dispatcher that is
// no member).
func (d *Dispatcher) Member() string {
	if !d.cfg.member {
		return ""
	}
	return d.root.ActorSystem().Address()
}

// Prepare checks a turn and builds what it needs from the request alone,
// once (see Prepared): a caller that wants to refuse bad input before it
// starts anything (an HTTP 400, a usage error) calls Prepare, then
// DispatchPrepared. The turn's approve and exclude are settled under the
// dispatcher's policy (Config.MaxApprove, Config.Exclude). Errors wrap
// ErrBadRequest (and toolkit.ErrToolCollision for a client tool named
// like a built-in of the provider's tools array); nothing ran. t is not
// changed.
func (d *Dispatcher) Prepare(t *messages.DispatchTurn) (*Prepared, error) {
	return d.PrepareWith(t, Policy{})
}

// PrepareWith is Prepare under narrow as well as the dispatcher's policy:
// the turn gets the lower approval and the exclusions of both (see
// Policy).
func (d *Dispatcher) PrepareWith(t *messages.DispatchTurn, narrow Policy) (*Prepared, error) {
	seq := d.nextID.Add(1)
	p, err := prepare(d.cfg, t, narrow, d.idPrefix+strconv.FormatUint(seq, 10))
	if err != nil {
		return nil, err
	}
	p.d, p.seq = d, seq
	return p, nil
}

// ToolsView is the tools view a turn of provider with these client tools
// and exclusions gets under the dispatcher's policy and narrow (the
// exclusions Prepare settles): for listing a run's tools.
func (d *Dispatcher) ToolsView(provider string, clientTools []*messages.ToolSpec, exclude []string, narrow Policy) (*toolkit.View, error) {
	return d.cfg.view(provider, clientTools, mergeNames(d.cfg.Exclude, narrow.Exclude, exclude))
}

// Approval is the approval a turn that asks for asked gets under the
// dispatcher's policy and narrow, as Prepare settles it, and whether a
// ceiling lowered it: for a caller that chooses a turn's narrower policy
// by what it would get (run asks a person only when there is one).
func (d *Dispatcher) Approval(asked string, narrow Policy) (approve string, lowered bool) {
	return d.cfg.approval(narrow, asked)
}

// Dispatch runs one turn and returns its result: one tool message per call,
// in call order, committed before it returns. If ctx ends first the turn is
// canceled, and Dispatch still waits for the canceled turn to commit.
// Tool failures are statuses; the error is for infrastructure failures.
func (d *Dispatcher) Dispatch(ctx context.Context, t *messages.DispatchTurn) (*messages.TurnResult, error) {
	p, err := d.Prepare(t)
	if err != nil {
		return nil, err
	}
	return d.DispatchPrepared(ctx, p)
}

// DispatchPrepared is Dispatch of a turn this dispatcher prepared. A
// Prepared is one request: dispatching it a second time is ErrBadRequest.
func (d *Dispatcher) DispatchPrepared(ctx context.Context, p *Prepared) (*messages.TurnResult, error) {
	switch {
	case p == nil || p.d != d:
		return nil, fmt.Errorf("%w: the turn was not prepared by this dispatcher", ErrBadRequest)
	case !p.sent.CompareAndSwap(false, true):
		return nil, fmt.Errorf("%w: the prepared turn was dispatched already; prepare it again", ErrBadRequest)
	case d.closing.Load():
		return nil, ErrClosed
	}
	t := p.turn
	span := d.cfg.startDispatch(ctx, t)
	defer span.End()
	d.inflight.Add(1)
	defer d.inflight.Done()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d.mu.Lock()
	d.cancels[p.seq] = cancel
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.cancels, p.seq)
		d.mu.Unlock()
	}()

	r, err := d.router.Turn(cctx, p)
	if err != nil {
		return nil, fmt.Errorf("dispatching turn of session %q: %w", t.Session, err)
	}
	if r.Conflict {
		return r, fmt.Errorf("%w: %s", ErrTurnIDConflict, r.Error)
	}
	if r.Error != "" {
		if r.NoSpace {
			return r, &noSpaceError{fmt.Sprintf("dispatching turn of session %q: %s", t.Session, r.Error)}
		}
		if r.Fenced {
			return r, &fencedError{fmt.Sprintf("dispatching turn of session %q: %s", t.Session, r.Error)}
		}
		return r, fmt.Errorf("dispatching turn of session %q: %s", t.Session, r.Error)
	}
	return r, nil
}

// noSpaceError is the error of a turn whose store refused a write for want
// of space (TurnResult.no_space): it matches cachestore.ErrNoSpace.
type noSpaceError struct{ text string }

func (e *noSpaceError) Error() string { return e.text }
func (e *noSpaceError) Unwrap() error { return cachestore.ErrNoSpace }

// fencedError is the error of a turn whose write the store refused because
// another writer took the session over while it ran (TurnResult.fenced):
// it matches cachestore.ErrFenced. The session is served by that writer:
// the turn may be sent again with its turn_id.
type fencedError struct{ text string }

func (e *fencedError) Error() string { return e.text }
func (e *fencedError) Unwrap() error { return cachestore.ErrFenced }

// checkTurn refuses a turn that is malformed or whose arguments total more
// than maxBytes.
func checkTurn(t *messages.DispatchTurn, maxBytes int) error {
	if t == nil {
		return fmt.Errorf("%w: no turn", ErrBadRequest)
	}
	if err := checkSessionID(t.Session); err != nil {
		return err
	}
	switch {
	case len(t.Run) > 256 || len(t.TurnId) > 256:
		return fmt.Errorf("%w: run or turn id longer than 256 bytes", ErrBadRequest)
	case t.Message == nil:
		return fmt.Errorf("%w: the turn has no assistant message", ErrBadRequest)
	}
	switch t.Approve {
	case "", ApproveAsk, ApproveAll, ApproveNone:
	default:
		return fmt.Errorf("%w: approve must be ask, all or none, got %q", ErrBadRequest, t.Approve)
	}
	total := 0
	for _, tc := range t.Message.GetToolCalls() {
		total += len(tc.GetFunction().GetArguments())
	}
	if total > maxBytes {
		return fmt.Errorf("%w: the turn's arguments total %d bytes, more than the %d a turn may carry; nothing ran: split the calls over several turns",
			ErrBadRequest, total, maxBytes)
	}
	return nil
}

// checkSessionID refuses a turn's session id that cannot name a session.
func checkSessionID(session string) error {
	switch {
	case session == "":
		return fmt.Errorf("%w: the turn has no session id", ErrBadRequest)
	case len(session) > 256:
		return fmt.Errorf("%w: session id longer than 256 bytes", ErrBadRequest)
	}
	return nil
}

// Confirm answers a tool_confirm event. The reply is bound to the call id and
// the hash of the call's canonical arguments and is used once. It answers
// the confirmation a running turn waits on or, when none does, the
// deferred approval (awaiting_approval) the store keeps for the call, on
// whatever member and however long after it was asked: "accepted" once the
// answer is taken (an approved call then runs after the session's running
// turn, its tool_result follows), "mismatch" for another hash (nothing
// changes), "already_answered" for a call already settled, "not_found"
// for a call the session never committed.
func (d *Dispatcher) Confirm(ctx context.Context, r *messages.ConfirmReply) (*messages.ConfirmAck, error) {
	if r == nil || r.Session == "" || r.CallId == "" {
		return nil, fmt.Errorf("%w: a confirmation needs session and call id", ErrBadRequest)
	}
	tp, ts, span := d.cfg.startRequest(ctx, spanConfirm, r.Session, r.CallId)
	if tp != "" {
		// The caller's message stays as it was.
		r = proto.Clone(r).(*messages.ConfirmReply)
		r.Traceparent, r.Tracestate = tp, ts
	}
	if d.closing.Load() {
		endRequest(span, ErrClosed)
		return nil, ErrClosed
	}
	ack, err := d.router.Confirm(ctx, r)
	if err == nil && ack.GetStatus() == confirmNotFound && !r.Stored {
		// No running turn waits on it: a deferred approval, if the store
		// keeps one, answered by the session after its running turn.
		r = proto.Clone(r).(*messages.ConfirmReply)
		r.Stored = true
		ack, err = d.router.Confirm(ctx, r)
	}
	switch {
	case err != nil:
	case ack.GetStatus() == confirmClosed:
		err = ErrClosed
	case ack.GetStatus() == confirmFailed:
		err = errors.New("the store failed while the answer was taken; nothing was taken")
	}
	if err != nil {
		err = fmt.Errorf("confirming call %q: %w", r.CallId, err)
		endRequest(span, err)
		return nil, err
	}
	if ack.Status != "accepted" {
		span.SetAttributes(attrStatus.String(ack.Status))
	}
	span.End()
	return ack, nil
}

// EndRun deletes a run's state (de-duplication table, fetched schemas) once
// the session's queued turns have ended.
func (d *Dispatcher) EndRun(ctx context.Context, session, run string) error {
	if session == "" || run == "" {
		return fmt.Errorf("%w: ending a run needs session and run", ErrBadRequest)
	}
	return d.ack("ending run "+strconv.Quote(run), func() (*messages.Ack, error) {
		return d.router.EndRun(ctx, &messages.EndRun{Session: session, Run: run})
	})
}

// Answer answers a question a tool is waiting on (ask_user, store_secret).
// Secret answers never appear in events, logs or errors.
func (d *Dispatcher) Answer(ctx context.Context, session, callID, text string, declined bool) error {
	return d.AnswerWith(ctx, session, callID, toolkit.Answer{Text: text, Declined: declined})
}

// AnswerWith is Answer with the whole answer: for store_secret, the
// origins the human kept of those asked about.
func (d *Dispatcher) AnswerWith(ctx context.Context, session, callID string, a toolkit.Answer) error {
	if session == "" || callID == "" {
		return fmt.Errorf("%w: an answer needs session and call id", ErrBadRequest)
	}
	tp, ts, span := d.cfg.startRequest(ctx, spanAnswer, session, callID)
	err := d.ack("answering "+strconv.Quote(callID), func() (*messages.Ack, error) {
		return d.router.Answer(ctx, &messages.AnswerQuestion{Session: session, CallId: callID, Text: a.Text,
			Declined: a.Declined, Origins: a.Origins, Traceparent: tp, Tracestate: ts})
	})
	endRequest(span, err)
	return err
}

// ClientResult commits the result a caller hands back for a client tool's
// call (status client_pending): content with status ok, or error when
// isError. It is written by the session's commit actor between turns.
func (d *Dispatcher) ClientResult(ctx context.Context, session, callID, content string, isError bool) error {
	if session == "" || callID == "" {
		return fmt.Errorf("%w: a client result needs session and call id", ErrBadRequest)
	}
	tp, ts, span := d.cfg.startRequest(ctx, spanClientResult, session, callID)
	err := d.ack("client result for "+strconv.Quote(callID), func() (*messages.Ack, error) {
		return d.router.ClientResult(ctx, &messages.ClientResult{Session: session, CallId: callID, Content: content, IsError: isError,
			Traceparent: tp, Tracestate: ts})
	})
	endRequest(span, err)
	return err
}

// ack sends a request whose reply is a *messages.Ack (what names it) and
// returns its error.
func (d *Dispatcher) ack(what string, send func() (*messages.Ack, error)) error {
	if d.closing.Load() {
		return ErrClosed
	}
	a, err := send()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return ackErr(a)
}

// Store returns the store the dispatcher writes, for reading sessions back.
func (d *Dispatcher) Store() cachestore.SessionStore { return d.cfg.Store }

// ConfirmTimeout returns how long a confirmation waits for an answer
// (Config.ConfirmTimeout, default filled in).
func (d *Dispatcher) ConfirmTimeout() time.Duration { return d.cfg.ConfirmTimeout }

// MaxTurnBytes is the most bytes of arguments one turn may carry
// (Config.MaxTurnBytes with its default filled in).
func (d *Dispatcher) MaxTurnBytes() int { return d.cfg.MaxTurnBytes }

// Close stops accepting turns and waits for running ones to end; when ctx
// ends first it cancels them and waits (at most drainBound) for their
// commit. A cluster member (NewRouted) also stops taking turns into the
// sessions it hosts, whoever sent them (they are asked again and go to the
// session's next owner once this member has left), and waits for and
// cancels those the same way. Then it closes the router (a member leaves
// the cluster and hands its sessions over), stops the dispatcher actor
// and, if the dispatcher owns it, its actor system. The store is the
// caller's to close.
func (d *Dispatcher) Close(ctx context.Context) error {
	if d.closing.Swap(true) {
		return nil
	}
	if d.cfg.drain != nil {
		d.cfg.drain.draining.Store(true)
	}
	if dr, ok := d.router.(Drainer); ok {
		dr.Drain()
	}
	done := make(chan struct{})
	waitCtx, stopWaiting := context.WithCancel(context.Background())
	defer stopWaiting()
	go func() {
		d.inflight.Wait()
		if d.cfg.drain != nil {
			_ = d.cfg.drain.wait(waitCtx)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		d.Cancel()
		if d.cfg.drain != nil {
			for _, pid := range d.cfg.drain.actors() {
				d.root.Send(pid, &drainCancel{})
			}
		}
		select {
		case <-done:
		case <-time.After(drainBound):
			d.cfg.Logger.Warn().Dur("bound", drainBound).Msg("turns canceled at the end of the grace did not end in time; closing anyway")
		}
	}
	err := d.router.Close()
	if d.system != nil && !d.system.IsStopped() {
		d.system.Shutdown()
	}
	d.cfg.workers.close()
	return err
}

// Cancel cancels every running turn (used on shutdown signals); their
// results are still committed.
func (d *Dispatcher) Cancel() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.cancels {
		c()
	}
}
