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
	"github.com/rs/zerolog"

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
	stop    func() error
	log     zerolog.Logger
	// draining: this member drains (actors.Drainer); a turn a grain did
	// not take ends with actors.ErrClosed.
	draining atomic.Bool
}

// Drain makes turns that a grain does not take end (actors.Drainer).
func (r *router) Drain() { r.draining.Store(true) }

// Turn runs a turn on the session's grain. A grain that was stopping, or
// whose member drains (it answers with a dead letter: nothing ran), or not
// yet placed is asked again: a draining member's grains take turns again
// on the session's next owner once the member has left. A grain on this
// member is sent the prepared turn itself; one on another member the
// DispatchTurn, which it prepares when it arrives.
func (r *router) Turn(ctx context.Context, p *actors.Prepared) (*messages.TurnResult, error) {
	t := p.Turn()
	var untaken time.Time // the first dead letter
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("the turn was not taken before it was canceled; nothing ran: %w", err)
		}
		pid := r.grain(ctx, t.Session)
		if pid == nil {
			if attempt >= grainAttempts {
				return nil, fmt.Errorf("session %q: %w", t.Session, actors.ErrNoHost)
			}
			time.Sleep(grainRetryDelay)
			continue
		}
		var msg any = p
		if pid.Address != r.sys.Address() {
			r.p.forwarded.Add(1)
			msg = t
		}
		res, err := r.await(ctx, pid, t, msg)
		if deadLetter(res, err) {
			if r.draining.Load() {
				return nil, fmt.Errorf("this member is shutting down and the session's grain did not take the turn; nothing ran: %w", actors.ErrClosed)
			}
			if untaken.IsZero() {
				untaken = time.Now()
			}
			if time.Since(untaken) < untakenWindow {
				// The grain moved, passivated or its member drains:
				// nothing ran, ask again.
				r.c.PidCache.Remove(t.Session, SessionKind)
				time.Sleep(untakenRetryDelay)
				continue
			}
		}
		return actors.ReplyAs[*messages.TurnResult](res, err)
	}
}

// grain returns the PID of session's grain (nil if none could be had).
// protoactor's lookup asks the placed member's activator and waits for it
// up to its timeout (5 s) even when that member just died; a topology that
// changes meanwhile (the dead member dropped) makes the lookup be asked
// again at once, over the new members. An abandoned lookup ends by its
// own timeout.
func (r *router) grain(ctx context.Context, session string) *actor.PID {
	for {
		changed := r.p.next()
		got := make(chan *actor.PID, 1)
		go func() { got <- r.c.Get(session, SessionKind) }()
		tick := time.NewTicker(probeEvery)
	wait:
		for {
			select {
			case pid := <-got:
				tick.Stop()
				return pid
			case <-changed:
				break wait
			case <-tick.C:
				// The lookup waits on the placed member: is it dead?
				if addr := r.p.ownerAddress(session); addr != "" && addr != r.sys.Address() {
					probe(r.c, addr, r.log)
				}
			case <-ctx.Done():
				tick.Stop()
				return nil
			}
		}
		tick.Stop()
	}
}

// deadLetter reports whether a reply says the grain took nothing.
func deadLetter(res any, err error) bool {
	if _, ok := res.(*actor.DeadLetterResponse); ok {
		return true
	}
	return errors.Is(err, actor.ErrDeadLetter) || errors.Is(err, remote.ErrDeadLetter)
}

// await sends turn t (as msg) to a grain and waits for the reply, the
// caller's cancellation (passed on to the turn), or the grain's member
// leaving the cluster.
func (r *router) await(ctx context.Context, pid *actor.PID, t *messages.DispatchTurn, msg any) (any, error) {
	f := r.sys.Root.RequestFuture(pid, msg, actors.RequestTimeout)
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
	probed := time.Now()
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
			if pid.Address != r.sys.Address() && time.Since(probed) >= probeEvery {
				// A member whose death broke no connection of ours
				// is found here.
				probed = time.Now()
				probe(r.c, pid.Address, r.log)
			}
		}
	}
}

// Confirm, Answer, ClientResult and EndRun send their request to the
// session's grain (see request).
func (r *router) Confirm(ctx context.Context, m *messages.ConfirmReply) (*messages.ConfirmAck, error) {
	return actors.ReplyAs[*messages.ConfirmAck](r.request(ctx, m.Session, m))
}

func (r *router) Answer(ctx context.Context, m *messages.AnswerQuestion) (*messages.Ack, error) {
	return actors.ReplyAs[*messages.Ack](r.request(ctx, m.Session, m))
}

func (r *router) ClientResult(ctx context.Context, m *messages.ClientResult) (*messages.Ack, error) {
	return actors.ReplyAs[*messages.Ack](r.request(ctx, m.Session, m))
}

func (r *router) EndRun(ctx context.Context, m *messages.EndRun) (*messages.Ack, error) {
	return actors.ReplyAs[*messages.Ack](r.request(ctx, m.Session, m))
}

// request sends msg to the grain of session and waits for its reply. A
// grain that cannot be had, or that took nothing (a dead letter: it was
// stopping or moved), is asked again a few times; when none could be had
// the request ends with actors.ErrNoHost (nothing was delivered). The
// request is never sent again once a grain may have taken it.
func (r *router) request(ctx context.Context, session string, msg any) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, actors.WaitFor(ctx))
	defer cancel()
	for attempt := 0; ; attempt++ {
		pid := r.grain(ctx, session)
		if pid == nil {
			if attempt >= grainAttempts || ctx.Err() != nil {
				return nil, fmt.Errorf("session %q: %w", session, actors.ErrNoHost)
			}
			time.Sleep(grainRetryDelay)
			continue
		}
		if pid.Address != r.sys.Address() {
			r.p.forwarded.Add(1)
		}
		wait := time.Until(deadlineOf(ctx))
		res, err := r.sys.Root.RequestFuture(pid, msg, wait).Result()
		if deadLetter(res, err) && attempt < grainAttempts && ctx.Err() == nil {
			r.c.PidCache.Remove(session, SessionKind)
			time.Sleep(untakenRetryDelay)
			continue
		}
		return res, err
	}
}

// deadlineOf is ctx's deadline (request sets one).
func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// Close leaves the cluster (see leave).
func (r *router) Close() error {
	return r.stop()
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
