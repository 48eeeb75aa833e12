package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
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
)

// Dispatcher is the Go API of a dispatcher actor. Safe for concurrent use.
type Dispatcher struct {
	// immutable after start
	root   *actor.RootContext
	pid    *actor.PID
	cfg    Config
	system *actor.ActorSystem // set when the dispatcher owns its system
	// cluster is set for a cluster member (NewClusterMember): requests go
	// to session grains instead of the local dispatcher actor.
	cluster     *cluster.Cluster
	stopCluster func()
	members     *atomic.Pointer[[]string] // the cluster's member addresses

	nextID   atomic.Uint64
	closing  atomic.Bool
	inflight sync.WaitGroup

	mu      sync.Mutex
	cancels map[uint64]func() // guarded by mu: running Dispatch calls
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
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.board = newQuestionBoard()
	d := &Dispatcher{root: root, cfg: cfg, cancels: map[uint64]func(){}}
	props := actor.PropsFromProducer(func() actor.Actor { return newDispatcherActor(cfg) },
		actor.WithSupervisor(sessionSupervisor))
	d.pid = root.SpawnPrefix(props, "tooldispatch")
	return d, nil
}

// PID is the dispatcher actor, for callers that talk to it with messages:
// it accepts *messages.DispatchTurn (reply *messages.TurnResult) and
// *messages.ConfirmReply (reply *messages.ConfirmAck).
func (d *Dispatcher) PID() *actor.PID { return d.pid }

// Dispatch runs one turn and returns its result: one tool message per call,
// in call order, committed before it returns. If ctx ends first the turn is
// canceled, and Dispatch still waits for the canceled turn to commit.
// Tool failures are statuses; the error is for infrastructure failures.
func (d *Dispatcher) Dispatch(ctx context.Context, t *messages.DispatchTurn) (*messages.TurnResult, error) {
	if err := checkTurn(t); err != nil {
		return nil, err
	}
	if _, err := chaos.Parse(t.Chaos); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if len(t.ClientTools) > 0 {
		var client []*toolkit.Tool
		for _, s := range t.ClientTools {
			client = append(client, toolkit.ClientToolFromSpec(s.GetName(), s.GetDescription(), s.GetParameters()))
		}
		if _, err := toolkit.NewView(d.cfg.Registry, t.Provider, client, d.cfg.exclude(t.Exclude)); err != nil {
			return nil, fmt.Errorf("%w: client_tools: %v", ErrBadRequest, err)
		}
	}
	if d.closing.Load() {
		return nil, ErrClosed
	}
	t, span := d.cfg.startDispatch(ctx, t)
	defer span.End()
	d.inflight.Add(1)
	defer d.inflight.Done()
	id := d.nextID.Add(1)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d.mu.Lock()
	d.cancels[id] = cancel
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.cancels, id)
		d.mu.Unlock()
	}()

	var res any
	var err error
	if d.cluster != nil {
		res, err = d.clusterDispatch(cctx, t, id)
	} else {
		f := d.root.RequestFuture(d.pid, &dispatchRequest{id: id, turn: t}, requestTimeout)
		done := make(chan struct{})
		go func() {
			res, err = f.Result()
			close(done)
		}()
		select {
		case <-done:
		case <-cctx.Done():
			d.root.Send(d.pid, &cancelTurn{session: t.Session, id: id})
			<-done
		}
	}
	if err != nil {
		return nil, fmt.Errorf("dispatching turn of session %q: %w", t.Session, err)
	}
	r, ok := res.(*messages.TurnResult)
	if !ok {
		return nil, fmt.Errorf("dispatching turn of session %q: unexpected reply %T", t.Session, res)
	}
	if r.Conflict {
		return r, fmt.Errorf("%w: %s", ErrTurnIDConflict, r.Error)
	}
	if r.Error != "" {
		return r, fmt.Errorf("dispatching turn of session %q: %s", t.Session, r.Error)
	}
	return r, nil
}

func checkTurn(t *messages.DispatchTurn) error {
	switch {
	case t == nil:
		return fmt.Errorf("%w: no turn", ErrBadRequest)
	case t.Session == "":
		return fmt.Errorf("%w: the turn has no session id", ErrBadRequest)
	case len(t.Session) > 256:
		return fmt.Errorf("%w: session id longer than 256 bytes", ErrBadRequest)
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
	if total > maxTurnArgBytes {
		return fmt.Errorf("%w: the turn's arguments total %d bytes, more than the %d a turn may carry; nothing ran: split the calls over several turns",
			ErrBadRequest, total, maxTurnArgBytes)
	}
	return nil
}

// Confirm answers a tool_confirm event. The reply is bound to the call id and
// the hash of the call's canonical arguments and is used once.
func (d *Dispatcher) Confirm(ctx context.Context, r *messages.ConfirmReply) (*messages.ConfirmAck, error) {
	if r == nil || r.Session == "" || r.CallId == "" {
		return nil, fmt.Errorf("%w: a confirmation needs session and call id", ErrBadRequest)
	}
	var res any
	var err error
	if d.cluster != nil {
		res, err = d.clusterRequest(ctx, r.Session, r)
	} else {
		res, err = d.request(ctx, r)
	}
	if err != nil {
		return nil, err
	}
	ack, ok := res.(*messages.ConfirmAck)
	if !ok {
		return nil, fmt.Errorf("confirming call %q: unexpected reply %T", r.CallId, res)
	}
	return ack, nil
}

// EndRun deletes a run's state (de-duplication table, fetched schemas) once
// the session's queued turns have ended.
func (d *Dispatcher) EndRun(ctx context.Context, session, run string) error {
	if session == "" || run == "" {
		return fmt.Errorf("%w: ending a run needs session and run", ErrBadRequest)
	}
	if d.cluster != nil {
		res, err := d.clusterRequest(ctx, session, &messages.EndRun{Session: session, Run: run})
		if err != nil {
			return err
		}
		if a, ok := res.(*messages.Ack); ok {
			return ackErr(a)
		}
		return fmt.Errorf("ending run %q: unexpected reply %T", run, res)
	}
	res, err := d.request(ctx, &endRunRequest{session: session, run: run})
	if err != nil {
		return err
	}
	if r, ok := res.(*endRunReply); ok && r.err != nil {
		return r.err
	}
	return nil
}

func (d *Dispatcher) request(ctx context.Context, msg any) (any, error) {
	if d.closing.Load() {
		return nil, ErrClosed
	}
	timeout := requestTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	return d.root.RequestFuture(d.pid, msg, timeout).Result()
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
	if d.cluster != nil {
		res, err := d.clusterRequest(ctx, session, &messages.AnswerQuestion{Session: session, CallId: callID, Text: a.Text,
			Declined: a.Declined, Origins: a.Origins})
		if err != nil {
			return err
		}
		if a, ok := res.(*messages.Ack); ok {
			return ackErr(a)
		}
		return fmt.Errorf("answering %q: unexpected reply %T", callID, res)
	}
	return d.cfg.board.answer(session, callID, a)
}

// ClientResult commits the result a caller hands back for a client tool's
// call (status client_pending): content with status ok, or error when
// isError. It is written by the session's commit actor between turns.
func (d *Dispatcher) ClientResult(ctx context.Context, session, callID, content string, isError bool) error {
	if session == "" || callID == "" {
		return fmt.Errorf("%w: a client result needs session and call id", ErrBadRequest)
	}
	if d.cluster != nil {
		res, err := d.clusterRequest(ctx, session, &messages.ClientResult{Session: session, CallId: callID, Content: content, IsError: isError})
		if err != nil {
			return err
		}
		if a, ok := res.(*messages.Ack); ok {
			return ackErr(a)
		}
		return fmt.Errorf("client result for %q: unexpected reply %T", callID, res)
	}
	res, err := d.request(ctx, &clientResultRequest{session: session, callID: callID, content: content, isError: isError})
	if err != nil {
		return err
	}
	if r, ok := res.(*clientResultReply); ok {
		return r.err
	}
	return fmt.Errorf("client result for %q: unexpected reply %T", callID, res)
}

// Store returns the store the dispatcher writes, for reading sessions back.
func (d *Dispatcher) Store() cachestore.Store { return d.cfg.Store }

// Close stops accepting turns and waits for running ones to end; when ctx
// ends first it cancels them and waits for their commit. Then it stops the dispatcher actor and, if the
// dispatcher owns it, its actor system. The store is the caller's to close.
func (d *Dispatcher) Close(ctx context.Context) error {
	if d.closing.Swap(true) {
		return nil
	}
	done := make(chan struct{})
	go func() {
		d.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		d.mu.Lock()
		for _, c := range d.cancels {
			c()
		}
		d.mu.Unlock()
		<-done
	}
	var err error
	if d.cluster != nil {
		d.stopCluster()
	} else {
		_, err = d.root.PoisonFuture(d.pid).Result()
	}
	if d.system != nil {
		d.system.Shutdown()
	}
	if err != nil && !errors.Is(err, actor.ErrTimeout) {
		return err
	}
	return nil
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
