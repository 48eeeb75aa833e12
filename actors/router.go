package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Router carries the session protocol from a Dispatcher to the sessions'
// actors, one method per request. The local router sends them to the
// dispatcher actor, which keeps one session actor per session id; a
// cluster member's router (package actors/cluster) sends them to the
// session's grain on whichever member hosts it.
//
// A session actor takes the protobuf requests of package messages
// (*messages.DispatchTurn, *messages.CancelTurn, *messages.ConfirmReply,
// *messages.AnswerQuestion, *messages.ClientResult, *messages.EndRun),
// wherever they come from, and in this process a *Prepared in place of a
// DispatchTurn (its prepared view travels with it; a DispatchTurn is
// prepared when it arrives). A reply *actor.DeadLetterResponse means the
// session actor was stopping and took nothing: the router asks again.
// ReplyAs turns a reply into the type a method returns.
type Router interface {
	// Turn sends turn p (p.Turn().RequestId set) and returns its result.
	// When ctx ends first it sends CancelOf(p.Turn()) and still waits for
	// the result: the canceled turn commits what ran.
	Turn(ctx context.Context, p *Prepared) (*messages.TurnResult, error)
	// Confirm, Answer, ClientResult and EndRun send one request to its
	// session and return the reply, waiting at most until ctx's deadline.
	Confirm(ctx context.Context, r *messages.ConfirmReply) (*messages.ConfirmAck, error)
	Answer(ctx context.Context, a *messages.AnswerQuestion) (*messages.Ack, error)
	ClientResult(ctx context.Context, r *messages.ClientResult) (*messages.Ack, error)
	EndRun(ctx context.Context, e *messages.EndRun) (*messages.Ack, error)
	// Close stops what the router started. The Dispatcher calls it once,
	// after its running calls ended.
	Close() error
}

// Drainer is implemented by a Router whose member can drain (a cluster
// member): Close calls Drain first, when the member stops taking turns. A
// turn this member sent that a session actor did not take
// (*actor.DeadLetterResponse) then ends with ErrClosed instead of being
// asked again: nothing ran, and the caller sends it to another member.
type Drainer interface {
	Drain()
}

// CancelOf is the CancelTurn of turn t, in t's trace.
func CancelOf(t *messages.DispatchTurn) *messages.CancelTurn {
	return &messages.CancelTurn{Session: t.Session, RequestId: t.RequestId, Traceparent: t.Traceparent, Tracestate: t.Tracestate}
}

// ReplyAs returns the reply res of a session request as a T, or err; a
// reply of another type is an error naming it. For Router implementations.
func ReplyAs[T any](res any, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	r, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("unexpected reply %T, want %T", res, zero)
	}
	return r, nil
}

// localRouter routes through the dispatcher actor of this actor system.
type localRouter struct {
	root *actor.RootContext
	pid  *actor.PID
}

func (r *localRouter) Turn(ctx context.Context, p *Prepared) (*messages.TurnResult, error) {
	f := r.root.RequestFuture(r.pid, p, RequestTimeout)
	if ctx.Done() == nil {
		return ReplyAs[*messages.TurnResult](f.Result())
	}
	var res any
	var err error
	done := make(chan struct{})
	go func() {
		res, err = f.Result()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		r.root.Send(r.pid, CancelOf(p.turn))
		<-done
	}
	return ReplyAs[*messages.TurnResult](res, err)
}

func (r *localRouter) Confirm(ctx context.Context, m *messages.ConfirmReply) (*messages.ConfirmAck, error) {
	return ReplyAs[*messages.ConfirmAck](r.request(ctx, m))
}

func (r *localRouter) Answer(ctx context.Context, m *messages.AnswerQuestion) (*messages.Ack, error) {
	return ReplyAs[*messages.Ack](r.request(ctx, m))
}

func (r *localRouter) ClientResult(ctx context.Context, m *messages.ClientResult) (*messages.Ack, error) {
	return ReplyAs[*messages.Ack](r.request(ctx, m))
}

func (r *localRouter) EndRun(ctx context.Context, m *messages.EndRun) (*messages.Ack, error) {
	return ReplyAs[*messages.Ack](r.request(ctx, m))
}

func (r *localRouter) request(ctx context.Context, msg any) (any, error) {
	return r.root.RequestFuture(r.pid, msg, WaitFor(ctx)).Result()
}

func (r *localRouter) Close() error {
	// Sessions that are stopping (idle) end first: stopping the dispatcher
	// while one of them dies would send it a second Stop, a dead letter.
	_, _ = r.root.RequestFuture(r.pid, &drainSessions{}, drainTimeout).Result()
	_, err := r.root.PoisonFuture(r.pid).Result()
	if errors.Is(err, actor.ErrTimeout) {
		return nil
	}
	return err
}

// WaitFor is how long a request of a Router may wait: until ctx's
// deadline, or RequestTimeout.
func WaitFor(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return RequestTimeout
}
