package actors

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Event kinds of SPEC section 7.
const (
	EventToolCall       = "tool_call"
	EventToolCallStart  = "tool_call_start"
	EventToolCallText   = "tool_call_text"
	EventToolCallEnd    = "tool_call_end"
	EventExecError      = "exec_error"
	EventToolResult     = "tool_result"
	EventToolConfirm    = "tool_confirm"
	EventToolSkipped    = "tool_skipped"
	EventToolDeduped    = "tool_deduped"
	EventSchemaReturned = "schema_returned"
	// EventConfirmDecided settles a tool_confirm: its Status is one of
	// the Confirm statuses below. It is sent only for confirmations
	// that were asked with a tool_confirm event (not to an Approver).
	EventConfirmDecided = "confirm_decided"
)

// Statuses of an EventConfirmDecided.
const (
	ConfirmApproved = "approved"  // answered yes
	ConfirmDenied   = "denied"    // answered no
	ConfirmTimedOut = "timed_out" // no answer within ConfirmTimeout
	ConfirmCanceled = "canceled"  // the turn was canceled while it waited
)

// seqPerBlock is the size of a block of sequence numbers: the n-th event
// numbered in block b has seq b*seqPerBlock+n. The session's commit actor
// owns the session's blocks (sessionState.events) and stores its counter
// with what it writes; see eventBlock.
const seqPerBlock = 1_000_000_000

// eventBlock hands out the sequence numbers of one block. A turn numbers
// its events in a block of its own; the events that follow it before the
// next turn (client results, answered approvals, the approvals a run's end
// settles) go on in the same block. Safe for concurrent use.
type eventBlock struct {
	base uint64 // immutable
	n    atomic.Uint64
}

func newEventBlock(block uint64) *eventBlock { return &eventBlock{base: block * seqPerBlock} }

// next returns the block's next sequence number.
func (b *eventBlock) next() uint64 { return b.base + b.n.Add(1) }

// maxEventText caps the text an event carries; the full content is in the
// tool message.
const maxEventText = 4096

// maxEventArguments caps the arguments a tool_call event carries, and
// maxConfirmArguments those of a tool_confirm event.
const (
	maxEventArguments   = 4096
	maxConfirmArguments = 16384
)

// emitter stamps and delivers one turn's events. Streamed output comes from
// tool goroutines, so it is guarded by mu; it belongs to one turn and is
// dropped with it.
type emitter struct {
	sink      func(*messages.Event) // immutable
	session   string                // immutable
	run       string                // immutable
	turn      int64                 // immutable
	requestID string                // immutable: the turn's DispatchTurn.request_id
	seq       *eventBlock           // immutable after newEmitter: the block its events are numbered in
	clock     func() time.Time      // immutable
	redactor  toolkit.Redactor      // immutable; may be nil

	// mu keeps stamping and delivery in one order.
	mu sync.Mutex
}

// newEmitter returns the emitter of a turn's events, numbered in a block
// of the turn's number; the dispatcher's own emitters are numberedIn the
// session's blocks.
func newEmitter(cfg *Config, session, run string, turn int64, requestID string) *emitter {
	return &emitter{sink: cfg.Events, session: session, run: run, turn: turn, requestID: requestID,
		seq: newEventBlock(uint64(turn)), clock: cfg.Clock, redactor: cfg.Redactor}
}

// numberedIn has e number its events in seq, before its first event.
func (e *emitter) numberedIn(seq *eventBlock) *emitter {
	e.seq = seq
	return e
}

// active reports whether anyone receives events.
func (e *emitter) active() bool { return e != nil && e.sink != nil }

// emit redacts ev's texts, stamps ev and hands it to the sink, in
// stamping order.
func (e *emitter) emit(ev *messages.Event) {
	if !e.active() {
		return
	}
	if e.redactor != nil {
		ev.Text, ev.Arguments = e.redactor.Redact(ev.Text), e.redactor.Redact(ev.Arguments)
		ev.Diff, ev.Note = e.redactor.Redact(ev.Diff), e.redactor.Redact(ev.Note)
	}
	e.send(ev)
}

// send stamps ev, redacted already, and hands it to the sink.
func (e *emitter) send(ev *messages.Event) {
	ev.Session, ev.Run, ev.Turn, ev.RequestId = e.session, e.run, e.turn, e.requestID
	e.mu.Lock()
	defer e.mu.Unlock()
	ev.Seq = e.seq.next()
	ev.TimeUnixNano = e.clock().UnixNano()
	e.sink(ev)
}

// clip returns s redacted whole, then cut to at most n bytes outside every
// redaction marker (marked "…"), so that a cut never leaves part of a
// secret. Only the start of a long s is read.
func (e *emitter) clip(s string, n int) string {
	return clipRedacted(e.redactor, s, n)
}

// clipRedacted is emitter.clip for any redactor (nil: cut only).
func clipRedacted(r toolkit.Redactor, s string, n int) string {
	cut := false
	if len(s) > 2*n {
		// The rest is never shown: redact the start as the head of a
		// longer text, whose end may be a secret's start.
		s, cut = toolkit.RedactHead(r, s[:2*n]), true
	} else if r != nil {
		s = r.Redact(s)
	}
	if len(s) > n {
		s, cut = s[:toolkit.SafeCut(s, n)], true
	}
	if cut {
		s += "…"
	}
	return s
}

// callText is the streamed output of one call. Its stream redactor holds
// back the end of the text that may be the start of a secret until the
// next piece or the call's end; closed is set once the call's outcome is
// recorded, after which nothing of the call streams.
type callText struct {
	closed atomic.Bool
	mu     sync.Mutex
	stream toolkit.RedactStream // guarded by mu; created on the first piece
}

// text emits a piece of streamed output of a call that is still open,
// redacted across pieces.
func (e *emitter) text(ct *callText, callID, tool, piece string) {
	if !e.active() || ct.closed.Load() {
		return
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.closed.Load() {
		return
	}
	if e.redactor != nil {
		if ct.stream == nil {
			ct.stream = e.redactor.NewStream()
		}
		if piece = ct.stream.Write(piece); piece == "" {
			return
		}
	}
	e.send(&messages.Event{Kind: EventToolCallText, CallId: callID, Tool: tool, Text: piece})
}

// endText emits what the call's stream redactor held back and closes the
// call's stream: no text of the call follows.
func (e *emitter) endText(ct *callText, callID, tool string) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if !ct.closed.Load() && ct.stream != nil && e.active() {
		if rest := ct.stream.Flush(); rest != "" {
			e.send(&messages.Event{Kind: EventToolCallText, CallId: callID, Tool: tool, Text: rest})
		}
	}
	ct.closed.Store(true)
}

func (e *emitter) call(kind, callID, tool string) {
	if e.active() {
		e.emit(&messages.Event{Kind: kind, CallId: callID, Tool: tool})
	}
}

// ShownText is s as the dispatcher's events show a text of at most n bytes:
// secret values redacted by Config.Redactor, then cut. The service uses it
// for texts it reads back from the store (a deferred approval's turn).
func (d *Dispatcher) ShownText(s string, n int) string {
	return clipRedacted(d.cfg.Redactor, s, n)
}
