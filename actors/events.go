package actors

import (
	"sync"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
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
)

// seqPerTurn spaces sequence numbers by turn: event n of turn t has
// seq t*seqPerTurn+n, so a session's sequence keeps increasing across
// passivation, restarts and cluster members without a stored counter.
const seqPerTurn = 1_000_000_000

// maxEventText caps the text an event carries; the full content is in the
// tool message.
const maxEventText = 4096

// clientResultSeqBase places the tool_result of a client call handed back
// between turns after every event of the session's last turn.
const clientResultSeqBase = 500_000_000

// emitter stamps and delivers one turn's events. Streamed output comes from
// tool goroutines, so it is guarded by mu; it belongs to one turn and is
// dropped with it.
type emitter struct {
	sink    func(*messages.Event) // immutable
	session string                // immutable
	run     string                // immutable
	turn    int64                 // immutable
	clock   func() time.Time      // immutable
	redact  func(string) string   // immutable; may be nil

	mu sync.Mutex
	n  uint64 // guarded by mu
}

func newEmitter(cfg *Config, session, run string, turn int64) *emitter {
	return &emitter{sink: cfg.Events, session: session, run: run, turn: turn, clock: cfg.Clock, redact: cfg.Redact}
}

// active reports whether anyone receives events.
func (e *emitter) active() bool { return e != nil && e.sink != nil }

// emit stamps ev and hands it to the sink, in stamping order.
func (e *emitter) emit(ev *messages.Event) {
	if !e.active() {
		return
	}
	ev.Session, ev.Run, ev.Turn = e.session, e.run, e.turn
	if e.redact != nil {
		ev.Text, ev.Arguments = e.redact(ev.Text), e.redact(ev.Arguments)
		ev.Diff, ev.Note = e.redact(ev.Diff), e.redact(ev.Note)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	ev.Seq = uint64(e.turn)*seqPerTurn + e.n
	ev.TimeUnixNano = e.clock().UnixNano()
	e.sink(ev)
}

func (e *emitter) call(kind, callID, tool string) {
	if e.active() {
		e.emit(&messages.Event{Kind: kind, CallId: callID, Tool: tool})
	}
}
