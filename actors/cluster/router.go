package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/messages"
)

// router is the actors.Router of a member: it sends the session protocol to
// the session's grain, wherever it runs.
type router struct {
	sys     *actor.ActorSystem
	c       *protocluster.Cluster
	members *atomic.Pointer[[]string] // the cluster's member addresses
	p       *placement
	stop    func()
}

// Turn runs a turn on the session's grain. A grain that was stopping (it
// answers with a dead letter: nothing ran) or not yet placed is asked again.
func (r *router) Turn(ctx context.Context, t *messages.DispatchTurn) (any, error) {
	for attempt := 0; ; attempt++ {
		pid := r.c.Get(t.Session, SessionKind)
		if pid == nil {
			if attempt >= grainAttempts {
				return nil, fmt.Errorf("no member can host session %q", t.Session)
			}
			time.Sleep(grainRetryDelay)
			continue
		}
		if pid.Address != r.sys.Address() {
			r.p.forwarded.Add(1)
		}
		res, err := r.await(ctx, pid, t)
		if deadLetter(res, err) && attempt < grainAttempts {
			// The grain moved or passivated before it took the turn:
			// nothing ran, ask again.
			r.c.PidCache.Remove(t.Session, SessionKind)
			time.Sleep(grainRetryDelay)
			continue
		}
		return res, err
	}
}

// deadLetter reports whether a reply says the grain took nothing.
func deadLetter(res any, err error) bool {
	if _, ok := res.(*actor.DeadLetterResponse); ok {
		return true
	}
	return errors.Is(err, actor.ErrDeadLetter) || errors.Is(err, remote.ErrDeadLetter)
}

// await sends a turn to a grain and waits for the reply, the caller's
// cancellation (passed on to the turn), or the grain's member leaving the
// cluster.
func (r *router) await(ctx context.Context, pid *actor.PID, t *messages.DispatchTurn) (any, error) {
	f := r.sys.Root.RequestFuture(pid, t, requestTimeout)
	type reply struct {
		res any
		err error
	}
	done := make(chan reply, 1)
	go func() {
		res, err := f.Result()
		done <- reply{res, err}
	}()
	tick := time.NewTicker(memberCheck)
	defer tick.Stop()
	canceled := ctx.Done()
	for {
		select {
		case rep := <-done:
			return rep.res, rep.err
		case <-canceled:
			canceled = nil
			r.sys.Root.Send(pid, actors.CancelOf(t))
		case <-tick.C:
			if !r.isMember(pid.Address) {
				return nil, actors.ErrMemberLeft
			}
		}
	}
}

// Request sends msg to the grain of session and waits for its reply (the
// cluster asks again when the grain was stopping).
func (r *router) Request(ctx context.Context, session string, msg any) (any, error) {
	timeout := requestTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	if addr := r.p.ownerAddress(session); addr != "" && addr != r.sys.Address() {
		r.p.forwarded.Add(1)
	}
	return r.c.Request(session, SessionKind, msg, protocluster.WithTimeout(timeout))
}

// Close leaves the cluster.
func (r *router) Close() error {
	r.stop()
	return nil
}

// isMember reports whether addr is a member of the cluster now.
func (r *router) isMember(addr string) bool {
	if addr == r.sys.Address() {
		return true
	}
	ms := r.members.Load()
	if ms == nil {
		return true
	}
	for _, m := range *ms {
		if m == addr {
			return true
		}
	}
	return false
}
