package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// resetState drops the commit actor's cached state so the next turn reloads
// it from the store (after a failed commit or a failed turn).
type resetState struct{}

// stateReset answers a resetState: the cached state is dropped.
type stateReset struct{}

// commitActor is the single writer of everything its session persists, and
// the owner of the session's loaded state: the next turn number and the
// state of each run. A turn is lent its run's state between prepare and
// commit (the actor keeps no reference to it meanwhile) and hands it back
// with its commit, which the actor applies to it once the write is
// durable. Store calls block this actor only: its whole job is the
// session's ordered I/O.
type commitActor struct {
	cfg     *shared
	store   cachestore.SessionStore // cfg.Store
	session string
	// st is the session's state, owned by this actor until it hands it
	// back to the dispatcher (releaseState); nil after that.
	st *sessionState
}

// sessionState is what the commit actor caches of its session. It outlives
// the actor and has one owner at a time, handed over by move: the
// dispatcher actor keeps it while the session is idle and gives it to the
// session's next actor, whose commit actor owns it until the session is
// idle again and it hands it back (stateReleased). A hosted session
// actor's commit actor has one of its own, which dies with it.
type sessionState struct {
	loaded bool
	// fresh: the session had no committed turn when it was loaded
	// (NextTurn 1). A run's state is written only with a committed turn,
	// so the store then holds none of the session's, and every run state
	// written since went through this cache: a run not in it is new and is
	// not read from the store (a new session's first turn is one store
	// read, not two).
	fresh bool
	next  int64
	runs  runTable
	// events is the block the session numbers its events in: the running
	// or last turn's, or, before the first turn since the session was
	// loaded, the first of the two LoadSession took; nextBlock is the next
	// turn's. Every intent and commit stores nextBlock+1 as the session's
	// event counter, so no block a writer may use before it writes is ever
	// handed out again, after a crash either (storedEventBlock).
	events    *eventBlock
	nextBlock uint64
	// lent: a turn holds one run's state (taken out of runs) until its
	// commit hands it back, or a reset forgets it.
	lent bool
}

// runTable is the loaded runs' state by run name: the first run inline (a
// session mostly has one run at a time, and an idle session's record
// should not pay a map for it), the others in a map. While the session is
// idle a small inline run is kept compact: its de-duplication entries and
// fetched names in slices, since a map costs ~250 bytes however few its
// entries; the next lookup turns them back into maps.
type runTable struct {
	name string
	rs   *cachestore.RunState // nil: the inline slot is free, or compact
	more map[string]*cachestore.RunState

	compact bool // the inline run is dedup and fetched
	dedup   []*cachestore.DedupEntry
	fetched []string
}

// compactRunMax is the most entries of either kind a run may have to be
// kept compact.
const compactRunMax = 8

func (t *runTable) get(run string) *cachestore.RunState {
	if t.name == run {
		if t.compact {
			t.expand()
		}
		if t.rs != nil {
			return t.rs
		}
	}
	return t.more[run]
}

// shrink makes a small inline run compact (the session went idle).
func (t *runTable) shrink() {
	rs := t.rs
	if rs == nil || len(rs.Dedup) > compactRunMax || len(rs.Fetched) > compactRunMax {
		return
	}
	t.compact, t.rs, t.dedup, t.fetched = true, nil, nil, nil
	if len(rs.Dedup) != 0 {
		t.dedup = make([]*cachestore.DedupEntry, 0, len(rs.Dedup))
		for _, e := range rs.Dedup {
			t.dedup = append(t.dedup, e)
		}
	}
	if len(rs.Fetched) != 0 {
		t.fetched = make([]string, 0, len(rs.Fetched))
		for n, ok := range rs.Fetched {
			if ok {
				t.fetched = append(t.fetched, n)
			}
		}
	}
}

// expand turns the compact inline run back into its state.
func (t *runTable) expand() {
	rs := &cachestore.RunState{Dedup: make(map[string]*cachestore.DedupEntry, len(t.dedup)), Fetched: make(map[string]bool, len(t.fetched))}
	for _, e := range t.dedup {
		rs.Dedup[e.Key] = e
	}
	for _, n := range t.fetched {
		rs.Fetched[n] = true
	}
	t.compact, t.rs, t.dedup, t.fetched = false, rs, nil, nil
}

func (t *runTable) put(run string, rs *cachestore.RunState) {
	if t.compact && t.name == run {
		t.compact, t.dedup, t.fetched = false, nil, nil
	}
	switch {
	case (t.rs == nil && !t.compact) || t.name == run:
		t.name, t.rs = run, rs
	default:
		if t.more == nil {
			t.more = map[string]*cachestore.RunState{}
		}
		t.more[run] = rs
	}
}

func (t *runTable) del(run string) {
	if (t.rs != nil || t.compact) && t.name == run {
		*t = runTable{more: t.more}
		return
	}
	delete(t.more, run)
}

// take removes a run's state from the table and returns it (nil when the
// table has none).
func (t *runTable) take(run string) *cachestore.RunState {
	rs := t.get(run)
	if rs != nil {
		t.del(run)
	}
	return rs
}

func newCommitActor(cfg *shared, session string, st *sessionState) *commitActor {
	return &commitActor{cfg: cfg, store: cfg.Store, session: session, st: st}
}

func (a *commitActor) Receive(ctx actor.Context) {
	// The one mechanism for a failing store call: turns, pools and the
	// session ask with plain requests (no future, no timeout), so every
	// request must be answered, and it is answered here, on the actor's
	// own goroutine, exactly once: a panic (a store bug) answers the
	// request with an error and drops the cached state, which is what a
	// restart would do. The supervisor is not asked to answer for it: it
	// would have to decode another actor's envelope and know every
	// request type a second time.
	defer func() {
		if r := recover(); r != nil {
			a.recovered(ctx, r)
		}
	}()
	switch m := ctx.Message().(type) {
	case *prepareTurn:
		ctx.Respond(a.prepare(m))
	case *writeIntent:
		ctx.Respond(&storeDone{err: a.writeIntent(m)})
	case *writeTask:
		m.done <- a.writeIntent(&writeIntent{intent: m.intent})
	case *commitTurn:
		ctx.Respond(&storeDone{err: a.commitTurn(m)})
	case *messages.EndRun:
		ctx.Respond(&messages.Ack{Error: ackError(a.endRun(m))})
	case *messages.ClientResult:
		ctx.Respond(&messages.Ack{Error: ackError(a.clientResult(m))})
	case *takeApproval:
		ctx.Respond(a.takeApproval(m))
	case *peekApproval:
		ctx.Respond(a.peekApproval(m))
	case *settleApproval:
		ctx.Respond(a.settleApproval(m))
	case *resetState:
		a.reset()
		ctx.Respond(&stateReset{})
	case *releaseState:
		ctx.Respond(&stateReleased{session: a.session, state: a.release()})
	case *actor.Restarting:
		a.reset()
	}
}

// release gives up the session's state (the session is idle): compact,
// for the dispatcher to keep. A state with a run lent out (no idle session
// has one) is not handed back: the session is loaded again.
func (a *commitActor) release() *sessionState {
	st := a.st
	a.st = nil
	if st == nil || st.lent {
		return nil
	}
	st.runs.shrink()
	return st
}

func (a *commitActor) recovered(ctx actor.Context, r any) {
	a.cfg.Logger.Error().Str("session", a.session).Interface("reason", r).Msg("commit actor failed; its cached state is dropped")
	a.reset()
	err := fmt.Errorf("internal error in the store: %v", r)
	switch m := ctx.Message().(type) {
	case *prepareTurn:
		ctx.Respond(&prepared{err: err})
	case *writeIntent, *commitTurn:
		ctx.Respond(&storeDone{err: err})
	case *writeTask:
		m.done <- err
	case *messages.EndRun, *messages.ClientResult:
		ctx.Respond(&messages.Ack{Error: ackError(err)})
	case *takeApproval:
		ctx.Respond(&approvalTaken{err: err})
	case *peekApproval:
		ctx.Respond(&approvalPeeked{reply: m.reply, sender: m.sender})
	case *settleApproval:
		ctx.Respond(&approvalSettled{err: err})
	}
}

func (a *commitActor) reset() {
	if a.st != nil {
		*a.st = sessionState{}
	}
}

func (a *commitActor) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), storeTimeout)
}

// prepare loads what a turn needs and lends it its run's state.
func (a *commitActor) prepare(m *prepareTurn) *prepared {
	ctx, cancel := a.storeCtx()
	defer cancel()
	st := a.st
	// A state still lent is not after a turn that committed or was reset
	// (sessions run one turn at a time): what the cache holds is not
	// known, so loaded reloads it.
	if err := a.loaded(ctx); err != nil {
		return &prepared{err: err}
	}
	if m.turnID != "" {
		rec, err := a.store.TurnByID(ctx, a.session, m.turnID)
		switch {
		case err == nil:
			// A turn committed before turns carried the hash replays.
			conflict := rec.GetCallsHash() != "" && rec.GetCallsHash() != m.callsHash
			return &prepared{next: st.next, replay: rec, conflict: conflict}
		case !isNotFound(err):
			return &prepared{err: err}
		}
	}
	rs := st.runs.take(m.run)
	switch {
	case rs == nil && st.fresh:
		rs = &cachestore.RunState{Dedup: map[string]*cachestore.DedupEntry{}, Fetched: map[string]bool{}}
	case rs == nil:
		var err error
		if rs, err = a.store.LoadRun(ctx, a.session, m.run); err != nil {
			return &prepared{err: err}
		}
	}
	st.lent = true
	st.events, st.nextBlock = newEventBlock(st.nextBlock), st.nextBlock+1
	return &prepared{next: st.next, run: rs, events: st.events}
}

// storedEventBlock is the event counter every intent and commit stores:
// past the running turn's block and the next turn's.
func (st *sessionState) storedEventBlock() uint64 { return st.nextBlock + 1 }

// endRun deletes a run's state.
func (a *commitActor) endRun(m *messages.EndRun) error {
	ctx, cancel := a.storeCtx()
	defer cancel()
	if err := a.endRunApprovals(ctx, m.Run); err != nil {
		return err
	}
	a.st.runs.del(m.Run)
	err := a.store.EndRun(ctx, a.session, m.Run)
	if err != nil {
		// The store may still hold some of the run's state: read it
		// again rather than take the run for new.
		a.st.fresh = false
	}
	return err
}

func (a *commitActor) writeIntent(m *writeIntent) error {
	ctx, cancel := a.storeCtx()
	defer cancel()
	in := *m.intent
	in.EventBlock = a.st.storedEventBlock()
	return a.store.WriteIntent(ctx, &in)
}

// commitTurn writes a turn, then applies its changes to the run's state
// the turn hands back and keeps that state again.
func (a *commitActor) commitTurn(m *commitTurn) error {
	ctx, cancel := a.storeCtx()
	defer cancel()
	c, st := m.commit, a.st
	st.lent = false
	c.EventBlock = st.storedEventBlock()
	if err := a.heldApprovals(ctx, c); err != nil {
		a.reset()
		return err
	}
	c.MaxWaiting = a.cfg.MaxWaitingApprovals
	if err := a.commitUnderCap(ctx, c); err != nil {
		a.reset()
		return err
	}
	st.next = c.Record.Turn + 1
	if rs := m.run; rs != nil {
		for _, k := range c.DedupDel {
			delete(rs.Dedup, k)
		}
		for _, e := range c.DedupPut {
			rs.Dedup[e.Key] = e
		}
		for _, n := range c.FetchedAdd {
			rs.Fetched[n] = true
		}
		st.runs.put(c.Record.Run, rs)
	}
	return nil
}

// maxHeldApprovals bounds the deferred approvals a session keeps waiting:
// each is stored, listed by every member and shown until answered, and a
// model could otherwise ask for them without end.
const maxHeldApprovals = 64

// heldApprovals keeps a turn from deferring a call whose id names an
// approval the session still holds (a model may repeat a call id in a
// later turn): approvals are keyed by session and call id, so the new one
// would replace the one a person was shown and leave the earlier call
// awaiting_approval with no approval to answer, for ever. The repeated
// call is committed skipped instead, and the earlier approval stays. A
// call past maxHeldApprovals waiting in the session is skipped too.
func (a *commitActor) heldApprovals(ctx context.Context, c *cachestore.TurnCommit) error {
	if len(c.Approvals) == 0 {
		return nil
	}
	held, err := a.store.Approvals(ctx, c.Session)
	if err != nil {
		return err
	}
	kept := c.Approvals[:0]
	for _, ap := range c.Approvals {
		var reason string
		if i := slices.IndexFunc(held, func(h *cachestore.Approval) bool { return h.CallID == ap.CallID }); i >= 0 {
			reason = fmt.Sprintf("the call id %s already waits for approval in turn %d; give each call its own id",
				messages.ClipText(ap.CallID, 80), held[i].Turn)
		} else if len(held)+len(kept) >= maxHeldApprovals {
			reason = fmt.Sprintf("%d calls of this session are already waiting for approval, the most it may keep; "+
				"wait for their answers before asking for more", maxHeldApprovals)
		}
		if reason == "" {
			kept = append(kept, ap)
			continue
		}
		skipAwaiting(c.Record, ap.CallID, reason)
	}
	c.Approvals = kept
	return nil
}

// commitUnderCap commits c; when the store refuses it for the service's
// cap of waiting approvals (nothing of it written), the calls past the
// room left are committed skipped instead, saying why, and the turn is
// committed again (the room may have shrunk meanwhile: each try keeps
// fewer approvals, so it ends).
func (a *commitActor) commitUnderCap(ctx context.Context, c *cachestore.TurnCommit) error {
	for {
		err := a.store.CommitTurn(ctx, c)
		var capErr *cachestore.WaitingCapError
		if !errors.As(err, &capErr) || len(c.Approvals) == 0 {
			return err
		}
		keep := min(int(capErr.Room()), len(c.Approvals)-1)
		reason := fmt.Sprintf("this service keeps at most %d calls waiting for approval, all sessions together, "+
			"and this one would be past it: it was not kept waiting; ask for it again once some are answered", capErr.Cap)
		for _, ap := range c.Approvals[keep:] {
			skipAwaiting(c.Record, ap.CallID, reason)
		}
		c.Approvals = c.Approvals[:keep]
	}
}

// skipAwaiting commits the call of callID awaiting approval in rec
// skipped, saying why.
func skipAwaiting(rec *messages.TurnRecord, callID, reason string) {
	for _, tm := range rec.GetToolMessages() {
		if tm.GetToolCallId() == callID && tm.GetStatus() == string(toolkit.StatusAwaitingApproval) {
			tm.Status = string(toolkit.StatusSkipped)
			tm.Content = skippedText(reason)
		}
	}
}

// clientResult amends a client_pending call with the caller's result and
// emits its tool_result event.
func (a *commitActor) clientResult(m *messages.ClientResult) error {
	ctx, cancel := a.storeCtx()
	defer cancel()
	if err := a.loaded(ctx); err != nil {
		return err
	}
	st := toolkit.StatusOK
	if m.IsError {
		st = toolkit.StatusError
	}
	content := m.Content
	if a.cfg.Redactor != nil {
		content = a.cfg.Redactor.Redact(content)
	}
	msg := &messages.ToolMessage{Role: "tool", ToolCallId: m.CallId, Status: string(st), Content: content}
	var name string
	rec, err := a.store.AmendToolMessage(ctx, a.session, m.CallId, []string{string(toolkit.StatusClientPending)},
		msg)
	switch {
	case errors.Is(err, cachestore.ErrNotFound):
		return ErrNoPending
	case errors.Is(err, cachestore.ErrAlreadySettled):
		return ErrAlreadyAnswered
	case err != nil:
		return err
	}
	for _, tm := range rec.ToolMessages {
		if tm.ToolCallId == m.CallId {
			name = tm.Name
		}
	}
	if name == "" {
		for _, tc := range rec.Assistant.GetToolCalls() {
			if tc.GetId() == m.CallId {
				c, _ := toolkit.ResolveCall(tc.GetFunction().GetName(), tc.GetFunction().GetArguments(), a.cfg.Limits)
				name = c.Name
			}
		}
	}
	a.cfg.Observer.CallDone(name, msg.Status)
	if a.cfg.Events != nil {
		ev := &messages.Event{Kind: EventToolResult, Session: a.session, Run: rec.Run, Turn: rec.Turn, CallId: m.CallId,
			Tool: name, Status: msg.Status, Text: clipRedacted(a.cfg.Redactor, content, maxEventText),
			Seq:          a.st.events.next(),
			TimeUnixNano: a.cfg.Clock().UnixNano()}
		a.cfg.Events(ev)
	}
	return nil
}
