package service

import (
	"slices"
	"sort"
	"sync"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/messages"
)

// EventLagged is the kind of the last event a subscriber gets when it fell
// behind and was dropped. Its Seq is the last sequence number the subscriber
// was sent: resubscribing after it (Last-Event-ID) replays what the session's
// ring still holds.
const EventLagged = "lagged"

// EventConfirmDecided is the kind of the dispatcher's event that settles a
// tool_confirm (Status approved, denied, timed_out or canceled; see
// actors.EventConfirmDecided). Like every event it has a sequence number
// and is replayed to a client that resumes before it.
const EventConfirmDecided = actors.EventConfirmDecided

// maxDecided is how many settled confirmations per session the broker
// remembers, so that another answer to one is told it was already
// answered rather than that it never existed.
const maxDecided = 256

// Defaults of BrokerOptions.
const (
	defaultSubscriberBuffer = 256
	defaultReplayEvents     = 1024
	defaultReplayBytes      = 512 << 10
	defaultMaxSessions      = 256
	defaultRecentTurns      = 20
)

// BrokerOptions configures a Broker. Zero (or negative) fields take their
// defaults.
type BrokerOptions struct {
	// SubscriberBuffer is how many events a subscriber may have unread
	// before it is dropped with a lagged notice. Default 256.
	SubscriberBuffer int
	// ReplayEvents and ReplayBytes bound each session's replay ring: the
	// recent events a reconnecting client gets back. Defaults 1024 events
	// and 512 KiB (texts counted).
	ReplayEvents int
	ReplayBytes  int
	// MaxSessions is how many sessions the broker keeps state for. Beyond
	// it, the least recently active session with no subscriber and nothing
	// pending is forgotten (its persisted turns stay in the store).
	// Default 256.
	MaxSessions int
	// RecentTurns is how many turns per session the broker summarises for
	// the operator page. Default 20.
	RecentTurns int
}

func (o BrokerOptions) withDefaults() BrokerOptions {
	if o.SubscriberBuffer <= 0 {
		o.SubscriberBuffer = defaultSubscriberBuffer
	}
	if o.ReplayEvents <= 0 {
		o.ReplayEvents = defaultReplayEvents
	}
	if o.ReplayBytes <= 0 {
		o.ReplayBytes = defaultReplayBytes
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = defaultMaxSessions
	}
	if o.RecentTurns <= 0 {
		o.RecentTurns = defaultRecentTurns
	}
	return o
}

// Broker fans the dispatcher's events out to subscribers (SSE streams) and
// keeps what the operator page shows: pending confirmations and questions
// and a summary of each session's recent turns.
//
// Publish never blocks: every subscriber has a bounded buffer, and one that
// falls behind is dropped with a final EventLagged notice instead of slowing
// the dispatcher down. Events are shared between subscribers and must not be
// modified after Publish. All methods are safe for concurrent use. A Broker
// starts no goroutines.
type Broker struct {
	opts BrokerOptions // immutable after NewBroker

	mu       sync.Mutex
	sessions map[string]*sessionLog   // guarded by mu
	global   map[*subscriber]struct{} // guarded by mu: subscribers to every session
	tick     uint64                   // guarded by mu: activity clock for eviction
}

// subscriber is one open subscription.
type subscriber struct {
	ch      chan *messages.Event // immutable
	session string               // immutable; "" for every session
	request string               // immutable; when set, only that request's events
	lastSeq uint64               // guarded by Broker.mu: last seq sent
	done    bool                 // guarded by Broker.mu: ch is closed
}

// NewBroker returns an empty broker.
func NewBroker(opts BrokerOptions) *Broker {
	return &Broker{
		opts:     opts.withDefaults(),
		sessions: map[string]*sessionLog{},
		global:   map[*subscriber]struct{}{},
	}
}

// Publish records ev and hands it to the subscribers of its session and to
// the subscribers of every session. It is meant as actors.Config.Events and
// never blocks. Events without a session are ignored.
func (b *Broker) Publish(ev *messages.Event) {
	if ev == nil || ev.GetSession() == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessionLocked(ev.Session)
	s.remember(ev, b.opts)
	s.track(ev, b.opts.RecentTurns)
	b.fanOutLocked(s, ev)
}

// ConfirmAnswered removes a confirmation the API answered from the pending
// list at once, so GET /v1/pending no longer shows it when the answer's
// response arrives; the dispatcher's EventConfirmDecided tells the
// subscribers. It does nothing when the confirmation is no longer pending.
func (b *Broker) ConfirmAnswered(session, callID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.sessions[session]; ok {
		if p, ok := s.pending[callID]; ok {
			s.settle(p)
		}
	}
}

// Decided reports whether the session's confirmation of callID was
// settled (answered, timed out or canceled), as far as the broker still
// remembers: the last maxDecided of each session it keeps.
func (b *Broker) Decided(session, callID string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.sessions[session]
	return ok && s.decided[callID]
}

// fanOutLocked hands ev to the subscribers of its session and of every
// session.
func (b *Broker) fanOutLocked(s *sessionLog, ev *messages.Event) {
	for sub := range s.subs {
		b.deliverLocked(sub, ev)
	}
	for sub := range b.global {
		b.deliverLocked(sub, ev)
	}
}

// Subscribe opens a subscription to one session's events, or to every
// session's when session is "". The channel is closed by cancel, or after an
// EventLagged notice when the subscriber fell behind; cancel may be called
// more than once.
//
// afterSeq is the last sequence number the caller has seen (an SSE
// Last-Event-ID), zero for a new subscription. A new subscription starts
// with the events that asked the session's still pending confirmations and
// questions, so a new client sees what waits for an answer. A resumed one
// starts with the session's recorded events after afterSeq (as far as the
// ring still holds them) and the pending ones after it, so a reconnecting
// client gets what it missed. For every session, afterSeq is not
// meaningful (sequence numbers are per session): only the pending events
// are replayed.
func (b *Broker) Subscribe(session string, afterSeq uint64) (<-chan *messages.Event, func()) {
	return b.subscribe(&subscriber{session: session}, afterSeq, true)
}

// subscribeRequest opens a subscription to the events of one turn request
// of session (messages.Event.request_id, actors.Prepared.RequestID) after
// afterSeq: what the request's own stream shows, whatever other turns of
// the session run or wait meanwhile. Pending events are not replayed.
func (b *Broker) subscribeRequest(session, requestID string, afterSeq uint64) (<-chan *messages.Event, func()) {
	return b.subscribe(&subscriber{session: session, request: requestID}, afterSeq, false)
}

// subscribe opens sub (its session, and request if any, set) with the
// choice of replaying pending events made by the caller.
func (b *Broker) subscribe(sub *subscriber, afterSeq uint64, withPending bool) (<-chan *messages.Event, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var replay []*messages.Event
	session := sub.session
	if session == "" {
		if withPending {
			for _, s := range b.sessions {
				replay = append(replay, s.pendingEvents(0)...)
			}
			sort.SliceStable(replay, func(i, j int) bool { return replay[i].GetTimeUnixNano() < replay[j].GetTimeUnixNano() })
		}
		b.global[sub] = struct{}{}
	} else {
		s := b.sessionLocked(session)
		if afterSeq > 0 {
			replay = sub.only(s.since(afterSeq))
		}
		if withPending {
			replay = mergeBySeq(replay, s.pendingEvents(afterSeq))
		}
		s.subs[sub] = struct{}{}
	}
	sub.ch = make(chan *messages.Event, b.opts.SubscriberBuffer+len(replay))
	for _, ev := range replay {
		sub.ch <- ev
		sub.lastSeq = ev.GetSeq()
	}
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			b.mu.Lock()
			b.dropLocked(sub)
			b.mu.Unlock()
		})
	}
	return sub.ch, cancel
}

// deliverLocked sends ev to sub, or drops sub with a lagged notice when its
// buffer is full. One slot is kept free for that notice, so it never blocks.
func (b *Broker) deliverLocked(sub *subscriber, ev *messages.Event) {
	if sub.done || (sub.request != "" && ev.GetRequestId() != sub.request) {
		return
	}
	if len(sub.ch) >= cap(sub.ch)-1 {
		sub.ch <- &messages.Event{Kind: EventLagged, Session: sub.session, Seq: sub.lastSeq,
			Text: "this stream fell behind and was dropped; reconnect with Last-Event-ID to get the events it missed"}
		b.dropLocked(sub)
		return
	}
	sub.ch <- ev
	if sub.session != "" && ev.GetSeq() != 0 {
		sub.lastSeq = ev.GetSeq()
	}
}

// only returns the events of evs that sub takes: those of its request,
// when it follows one.
func (sub *subscriber) only(evs []*messages.Event) []*messages.Event {
	if sub.request == "" {
		return evs
	}
	var out []*messages.Event
	for _, ev := range evs {
		if ev.GetRequestId() == sub.request {
			out = append(out, ev)
		}
	}
	return out
}

// dropLocked ends a subscription.
func (b *Broker) dropLocked(sub *subscriber) {
	if sub.done {
		return
	}
	sub.done = true
	close(sub.ch)
	if sub.session == "" {
		delete(b.global, sub)
		return
	}
	if s, ok := b.sessions[sub.session]; ok {
		delete(s.subs, sub)
	}
}

// sessionLocked returns the state of a session, creating it (and forgetting
// an idle one when there are too many).
func (b *Broker) sessionLocked(id string) *sessionLog {
	b.tick++
	if s, ok := b.sessions[id]; ok {
		s.lastUse = b.tick
		return s
	}
	if len(b.sessions) >= b.opts.MaxSessions {
		b.evictLocked()
	}
	s := newSessionLog(id)
	s.lastUse = b.tick
	b.sessions[id] = s
	return s
}

// evictLocked forgets the least recently active session that nobody
// watches and that waits for nothing. When every session is busy, none is
// forgotten.
func (b *Broker) evictLocked() {
	var victim *sessionLog
	for _, s := range b.sessions {
		if s.busy() {
			continue
		}
		if victim == nil || s.lastUse < victim.lastUse {
			victim = s
		}
	}
	if victim != nil {
		delete(b.sessions, victim.id)
	}
}

// Sessions lists the sessions the broker has state for, sorted.
func (b *Broker) Sessions() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.sessions))
	for id := range b.sessions {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Pending lists the confirmations that wait for an answer in session, or in
// every session when session is "", oldest first.
func (b *Broker) Pending(session string) []PendingConfirm {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []PendingConfirm
	for _, s := range b.selectLocked(session) {
		for _, p := range s.pending {
			out = append(out, p.PendingConfirm)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].seq < out[j].seq || (out[i].seq == out[j].seq && out[i].Session < out[j].Session)
	})
	return out
}

// PendingCall returns the pending confirmation of one call.
func (b *Broker) PendingCall(session, callID string) (PendingConfirm, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.sessions[session]; ok {
		if p, ok := s.pending[callID]; ok {
			return p.PendingConfirm, true
		}
	}
	return PendingConfirm{}, false
}

// Questions lists the ask_user questions that wait for an answer in
// session, or in every session when session is "", oldest first.
func (b *Broker) Questions(session string) []PendingQuestion {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []PendingQuestion
	for _, s := range b.selectLocked(session) {
		for _, q := range s.questions {
			out = append(out, q.PendingQuestion)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].seq < out[j].seq || (out[i].seq == out[j].seq && out[i].Session < out[j].Session)
	})
	return out
}

// Recent returns the summaries of a session's recent turns, oldest first.
func (b *Broker) Recent(session string) []TurnSummary {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.sessions[session]
	if !ok {
		return nil
	}
	out := make([]TurnSummary, len(s.turns))
	for i, t := range s.turns {
		out[i] = *t
		out[i].Calls = slices.Clone(t.Calls)
	}
	return out
}

func (b *Broker) selectLocked(session string) []*sessionLog {
	if session != "" {
		if s, ok := b.sessions[session]; ok {
			return []*sessionLog{s}
		}
		return nil
	}
	out := make([]*sessionLog, 0, len(b.sessions))
	for _, s := range b.sessions {
		out = append(out, s)
	}
	return out
}

// mergeBySeq merges two lists of events in sequence order, each event once.
func mergeBySeq(a, b []*messages.Event) []*messages.Event {
	if len(b) == 0 {
		return a
	}
	out := slices.Concat(a, b)
	sort.SliceStable(out, func(i, j int) bool { return out[i].GetSeq() < out[j].GetSeq() })
	return slices.CompactFunc(out, func(x, y *messages.Event) bool { return x == y })
}
