package actors

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Router carries the session protocol from a Dispatcher to the sessions'
// actors. The protocol is protobuf messages only, so a router may cross
// processes: *messages.DispatchTurn (reply *messages.TurnResult),
// *messages.CancelTurn (no reply), *messages.ConfirmReply (reply
// *messages.ConfirmAck), and *messages.AnswerQuestion, *messages.ClientResult
// and *messages.EndRun (reply *messages.Ack).
//
// The local router sends them to the dispatcher actor, which keeps one
// session actor per session id; a cluster member's router (package
// actors/cluster) sends them to the session's grain on whichever member
// hosts it. A reply *actor.DeadLetterResponse means the session actor was
// stopping and took nothing: the router asks again.
type Router interface {
	// Turn sends t (its RequestId set) and returns the reply. When ctx
	// ends first it sends a *messages.CancelTurn naming t.RequestId and
	// still waits for the reply: the canceled turn commits what ran.
	Turn(ctx context.Context, t *messages.DispatchTurn) (any, error)
	// Request sends one of the other requests for session and returns the
	// reply, waiting at most until ctx's deadline.
	Request(ctx context.Context, session string, msg any) (any, error)
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

// localRouter routes through the dispatcher actor of this actor system.
type localRouter struct {
	root *actor.RootContext
	pid  *actor.PID
}

func (r *localRouter) Turn(ctx context.Context, t *messages.DispatchTurn) (any, error) {
	f := r.root.RequestFuture(r.pid, t, requestTimeout)
	if ctx.Done() == nil {
		return f.Result()
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
		r.root.Send(r.pid, CancelOf(t))
		<-done
	}
	return res, err
}

func (r *localRouter) Request(ctx context.Context, _ string, msg any) (any, error) {
	return r.root.RequestFuture(r.pid, msg, waitFor(ctx)).Result()
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

// waitFor is how long a request may wait: until ctx's deadline, or
// requestTimeout.
func waitFor(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return requestTimeout
}
