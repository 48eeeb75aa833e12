package actors

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Call states (running.state).
const (
	callRunning int32 = iota
	callReturned
	callAbandoned
)

// Abandoned calls: tools that did not return after their timeout (plus
// grace) or after a cancellation. Their slot is freed and they are reported
// timeout or canceled; their goroutine is left to finish.
var (
	abandonedTotal   atomic.Int64
	abandonedRunning atomic.Int64
)

// AbandonedCalls returns how many calls were abandoned since the process
// started and how many of them are still running. Config.Observer hears of
// each abandoned call when it happens (Observer.Abandoned); only this says
// whether its tool has returned since (the service exports it as
// tooldispatch_abandoned_calls_running).
func AbandonedCalls() (total, running int64) {
	return abandonedTotal.Load(), abandonedRunning.Load()
}

// poolInput is everything pass 2 needs; immutable.
type poolInput struct {
	cfg       *shared
	em        *emitter
	view      *toolkit.View
	session   string
	run       string
	turn      int64
	commit    *actor.PID
	followers map[int][]int
	tr        *turnTrace     // nil when tracing is off
	log       zerolog.Logger // the turn's logger (with its trace ids)
	// nobody: no person can answer these calls' questions (the run has
	// none, or the turn that asked for the call has ended): each is
	// declined at once (questionBoard.asker).
	nobody bool
}

// watchdogTick fires at the earliest deadline of the calls the pool has
// started (timeout plus grace, or the cancel grace once the turn was
// canceled); the pool abandons every call past its deadline.
type watchdogTick struct{}

// running is one call the pool has started.
type running struct {
	plan     *callPlan
	started  time.Time
	deadline time.Time // abandoned after it: timeout plus grace, or the cancel grace
	// graceEnds: the deadline is the cancel grace of a canceled turn (the
	// call is abandoned canceled, not timeout).
	graceEnds bool
	pid       *actor.PID
	text      callText // the call's streamed output; closed once its outcome is recorded
	// state settles who ends the call: the call actor when its tool
	// returns (callRunning → callReturned) or the watchdog when it gives up
	// on it (callRunning → callAbandoned); whichever comes second knows.
	state    atomic.Int32
	finished bool
	panicked bool       // free the slot on Terminated, not before
	span     trace.Span // the call's execute_tool span; nil when not traced
	start    startCall  // the message that hands the call to its actor (one allocation with the record)
}

// poolActor runs a turn's executable calls: each maximal run of consecutive
// concurrent calls is one segment run in parallel under the limit; every
// other call is a segment of its own, so it starts after all earlier calls
// end and before any later call starts. Before a segment starts, the intent
// record naming its calls is persisted.
//
// Calls run on call actors, children of the pool, which reuses a call actor
// for the next call once its call has ended (at most MaxConcurrency exist at
// once): spawning and stopping an actor per call cost more than the rest of
// a no-op call. The pool stays their supervisor: a call actor that panics
// answers its own call with an error and is stopped, and its slot is freed
// when it has terminated; a call actor whose call is abandoned is stopped and
// never reused. One watchdog timer per pool, set to the earliest deadline of
// the running calls (timeout plus grace, or, once the turn is canceled,
// the cancel grace), replaces a timer per call.
type poolActor struct {
	in     *poolInput
	ctx    context.Context
	intent *cachestore.Intent

	segments [][]*callPlan
	seg      int
	queuedAt time.Time // when the current segment's calls became ready
	queue    []*callPlan
	inflight int
	byPID    map[string]*running // call actor id -> its current (or last) call
	byIdx    map[int]*running
	outcomes map[int]*callOutcome
	idle     []*actor.PID // call actors whose call ended, ready for another
	canceled bool
	done     bool
	writing  []*callPlan // the segment whose intent is being written

	timer   *time.Timer // the watchdog; fires at timerAt
	timerAt time.Time   // zero when the timer is not armed
}

func newPoolActor(in *poolInput) *poolActor {
	return &poolActor{in: in, byPID: map[string]*running{}, byIdx: map[int]*running{}, outcomes: map[int]*callOutcome{}}
}

func (a *poolActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *runCalls:
		a.ctx, a.intent = m.ctx, m.intent
		if len(a.outcomes) == 0 {
			// sized once for the turn: no rehashing per call
			a.byIdx = make(map[int]*running, len(m.plans))
			a.outcomes = make(map[int]*callOutcome, len(m.plans))
		}
		a.segments = segments(m.plans)
		a.nextSegment(ctx)
	case *callOutcome:
		a.finished(ctx, m)
	case *storeDone:
		a.intentWritten(ctx, m.err)
	case *noteTask:
		a.noteTask(ctx, m)
	case *watchdogTick:
		a.watchdogTick(ctx)
	case *messages.CancelTurn:
		a.cancelTurn(ctx)
	case *actor.Terminated:
		if r, ok := a.byPID[m.Who.Id]; ok {
			delete(a.byPID, m.Who.Id)
			if r.panicked {
				a.inflight--
				a.launch(ctx)
			}
		}
	case *actor.Stopping:
		if a.timer != nil {
			a.timer.Stop()
		}
	}
}

// segments are pass 2's segments of a turn's executable calls (the rule
// is toolkit.Segments, which the bench's bare dispatcher follows too).
func segments(plans []*callPlan) [][]*callPlan {
	return toolkit.Segments(plans, func(p *callPlan) bool { return p.tool.Concurrent })
}

// nextSegment persists the intent for the next segment, then starts it.
func (a *poolActor) nextSegment(ctx actor.Context) {
	if a.seg == len(a.segments) {
		a.finish(ctx, nil)
		return
	}
	seg := a.segments[a.seg]
	a.seg++
	if a.canceled || a.ctx.Err() != nil {
		a.notStarted(seg, toolkit.StatusCanceled, "canceled: the turn was canceled before this call started; it did not run.")
		a.nextSegment(ctx)
		return
	}
	if a.intent == nil {
		// No intent record to write (an approved deferred call: its
		// claim is its intent).
		a.writing = seg
		a.intentWritten(ctx, nil)
		return
	}
	in := *a.intent
	in.Started = append([]int(nil), a.intent.Started...)
	for _, p := range seg {
		in.Started = append(in.Started, p.idx)
		in.Started = append(in.Started, a.in.followers[p.idx]...)
	}
	a.intent = &in
	a.writing = seg
	ctx.Request(a.in.commit, &writeIntent{intent: &in})
}

// noteTask has the intent record written again naming the task an outside
// server runs a call as (a small second write of the segment's intent,
// through the commit actor like every write of the session). Later
// segments' intents keep naming it. A call without an intent record (an
// approved deferred call: its claim is its intent) has nowhere to keep
// it: after a crash it reads outcome_unknown as before.
func (a *poolActor) noteTask(ctx actor.Context, m *noteTask) {
	if a.intent == nil || a.done {
		m.done <- nil
		return
	}
	in := *a.intent
	in.Tasks = make([]cachestore.TaskRef, 0, len(a.intent.Tasks)+1)
	for _, t := range a.intent.Tasks {
		if t.Index != m.idx {
			in.Tasks = append(in.Tasks, t)
		}
	}
	in.Tasks = append(in.Tasks, cachestore.TaskRef{Index: m.idx, ID: m.id, At: m.at})
	a.intent = &in
	ctx.Send(a.in.commit, &writeTask{intent: &in, done: m.done})
}

// intentWritten starts the segment whose intent record is durable, or ends
// the turn's calls when it could not be written.
func (a *poolActor) intentWritten(ctx actor.Context, err error) {
	seg := a.writing
	if seg == nil {
		return
	}
	a.writing = nil
	if err != nil {
		msg := "not run: the dispatcher could not record that this call was starting (" + err.Error() + ")."
		a.notStarted(seg, toolkit.StatusError, msg)
		for ; a.seg < len(a.segments); a.seg++ {
			a.notStarted(a.segments[a.seg], toolkit.StatusError, msg)
		}
		a.finish(ctx, err)
		return
	}
	if a.canceled {
		// Canceled while its intent was written: the segment did not start.
		a.notStarted(seg, toolkit.StatusCanceled, "canceled: the turn was canceled before this call started; it did not run.")
		a.nextSegment(ctx)
		return
	}
	a.queue = append(a.queue[:0], seg...)
	a.queuedAt = time.Now()
	a.launch(ctx)
}

func (a *poolActor) notStarted(seg []*callPlan, st toolkit.Status, text string) {
	for _, p := range seg {
		a.outcomes[p.idx] = &callOutcome{idx: p.idx, msg: toolMsg(p, st, text)}
	}
}

// launch starts queued calls up to the limit; when the segment is over it
// moves to the next one.
func (a *poolActor) launch(ctx actor.Context) {
	for a.inflight < a.in.cfg.MaxConcurrency && len(a.queue) > 0 && !a.canceled {
		p := a.queue[0]
		a.queue = a.queue[1:]
		a.start(ctx, p)
	}
	if a.inflight == 0 && len(a.queue) == 0 && !a.done {
		a.nextSegment(ctx)
	}
}

func (a *poolActor) start(ctx actor.Context, p *callPlan) {
	r := &running{plan: p, started: time.Now()}
	r.deadline = r.started.Add(p.tool.EffectiveTimeout() + a.in.cfg.WatchdogGrace)
	r.span = a.in.tr.startCall(p)
	obs := a.in.cfg.Observer
	obs.SlotWait(p.name, r.started.Sub(a.queuedAt))
	obs.InFlight(1)
	a.in.em.call(EventToolCallStart, p.id, p.name)
	if n := len(a.idle); n > 0 {
		r.pid = a.idle[n-1]
		a.idle = a.idle[:n-1]
	} else {
		in, turnCtx := a.in, a.ctx
		r.pid = ctx.Spawn(a.in.cfg.props(func() actor.Actor {
			return &callActor{in: in, turnCtx: turnCtx}
		}))
	}
	a.byPID[r.pid.Id] = r
	a.byIdx[p.idx] = r
	a.inflight++
	a.arm(ctx, r.deadline)
	r.start = startCall{plan: p, text: &r.text, state: &r.state, span: r.span}
	ctx.Send(r.pid, &r.start)
}

// arm makes the watchdog fire no later than at.
func (a *poolActor) arm(ctx actor.Context, at time.Time) {
	if !a.timerAt.IsZero() && !at.Before(a.timerAt) {
		return
	}
	a.timerAt = at
	if a.timer != nil {
		a.timer.Reset(time.Until(at))
		return
	}
	self, sys := ctx.Self(), ctx.ActorSystem()
	a.timer = time.AfterFunc(time.Until(at), func() { sys.Root.Send(self, &watchdogTick{}) })
}

// watchdogTick abandons the calls past their deadline and sets the
// watchdog to the earliest deadline of those still running.
func (a *poolActor) watchdogTick(ctx actor.Context) {
	a.timerAt = time.Time{}
	now := time.Now()
	var next time.Time
	for idx, r := range a.byIdx {
		if r.finished {
			continue
		}
		if !now.Before(r.deadline) {
			st := toolkit.StatusTimeout
			if r.graceEnds {
				st = toolkit.StatusCanceled
			}
			a.abandon(ctx, idx, st)
			continue
		}
		if next.IsZero() || r.deadline.Before(next) {
			next = r.deadline
		}
	}
	if !next.IsZero() {
		a.arm(ctx, next)
	}
}

// record settles a call's outcome once and emits its closing events.
func (a *poolActor) record(r *running, o *callOutcome) bool {
	if r.finished {
		return false
	}
	r.finished = true
	a.outcomes[o.idx] = o
	endCall(r.span, o.msg)
	a.in.em.closeCall(&r.text, o.msg)
	obs := a.in.cfg.Observer
	obs.InFlight(-1)
	obs.Executed(r.plan.name, o.msg.Status, time.Since(r.started))
	return true
}

func (a *poolActor) finished(ctx actor.Context, o *callOutcome) {
	r := a.byIdx[o.idx]
	if r == nil {
		return
	}
	if !a.record(r, o) {
		return
	}
	a.inflight--
	a.idle = append(a.idle, r.pid)
	a.launch(ctx)
}

// abandon reports a call that outlived its deadline as status and frees
// its slot, unless its tool has just returned.
func (a *poolActor) abandon(ctx actor.Context, idx int, status toolkit.Status) {
	r := a.byIdx[idx]
	if r == nil || r.finished {
		return
	}
	if !r.state.CompareAndSwap(callRunning, callAbandoned) {
		return // the tool has just returned; its outcome is on its way
	}
	p := r.plan
	text := fmt.Sprintf("timed out after %s; the tool did not stop when asked, so its work may go on in the background.", p.tool.EffectiveTimeout())
	if status == toolkit.StatusCanceled {
		text = "canceled: the turn was canceled; the tool did not stop when asked, so its work may go on in the background."
	}
	a.record(r, &callOutcome{idx: p.idx, msg: toolMsg(p, status, text)})
	abandonedTotal.Add(1)
	abandonedRunning.Add(1)
	a.in.cfg.Observer.Abandoned(p.name)
	a.in.log.Warn().Str("session", a.in.session).Str("tool", p.name).Str("call", p.id).
		Str("status", string(status)).Msg("abandoned a call that did not return")
	a.inflight--
	// The call actor is never handed another call, and is stopped with
	// the pool: a Stop sent here as well reaches a dead actor (a dead
	// letter) when the tool returns before the pool stops.
	a.launch(ctx)
}

func (a *poolActor) cancelTurn(ctx actor.Context) {
	if a.canceled {
		return
	}
	a.canceled = true
	a.notStarted(a.queue, toolkit.StatusCanceled, "canceled: the turn was canceled before this call started; it did not run.")
	a.queue = nil
	// The running calls get the cancel grace to return, on the one
	// watchdog timer.
	at := time.Now().Add(a.in.cfg.CancelGrace)
	for _, r := range a.byIdx {
		if !r.finished && at.Before(r.deadline) {
			r.deadline, r.graceEnds = at, true
			a.arm(ctx, at)
		}
	}
	if a.inflight == 0 && a.writing == nil {
		a.nextSegment(ctx)
	}
}

func (a *poolActor) finish(ctx actor.Context, err error) {
	if a.done {
		return
	}
	a.done = true
	ctx.Send(ctx.Parent(), &poolDone{outcomes: a.outcomes, err: err})
}

// HandleFailure: a call actor panicked while running its tool. Its call gets
// an error result here, once; its slot is freed when it has terminated.
func (a *poolActor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason any, _ any) {
	sup.StopChildren(child)
	r := a.byPID[child.Id]
	if r == nil {
		return
	}
	p := r.plan
	a.in.log.Error().Str("session", a.in.session).Str("tool", p.name).Str("call", p.id).Msg("tool panicked")
	if a.record(r, &callOutcome{idx: p.idx, msg: toolMsg(p, toolkit.StatusError, fmt.Sprintf("the tool panicked: %v", reason))}) {
		r.panicked = true
	}
}

// closeCall marks a call's outcome recorded, emits what its stream
// redactor held back, then exec_error (for a failure) and tool_call_end; no
// streamed text of the call can follow them.
func (e *emitter) closeCall(ct *callText, m *messages.ToolMessage) {
	e.endText(ct, m.ToolCallId, m.Name)
	if !e.active() {
		return
	}
	if m.Status != string(toolkit.StatusOK) {
		e.emit(&messages.Event{Kind: EventExecError, CallId: m.ToolCallId, Tool: m.Name, Status: m.Status, Text: e.clip(m.Content, maxEventText), Injected: m.Injected})
	}
	e.emit(&messages.Event{Kind: EventToolCallEnd, CallId: m.ToolCallId, Tool: m.Name, Status: m.Status, Injected: m.Injected})
}
