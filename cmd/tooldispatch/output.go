package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"

	"github.com/tooldispatch/tooldispatch/messages"
)

// The shapes run prints are the messages codec's (messages/encode.go).
type (
	// eventLine is an event as run prints it.
	eventLine = messages.EventJSON
	// toolMessageJSON is a tool message in the OpenAI shape, with its
	// status.
	toolMessageJSON = messages.OpenAIToolMessage
)

func eventJSON(ev *messages.Event) eventLine { return messages.EventToJSON(ev) }

func toolJSON(m *messages.ToolMessage) toolMessageJSON { return messages.ToolMessageJSON(m) }

func assistantMessageJSON(m *messages.AssistantMessage) messages.OpenAIAssistantMessage {
	return messages.AssistantJSON(m)
}

// marshalLine encodes v as one JSON line, leaving <, > and & as they are
// (the output is not HTML).
func marshalLine(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only strings, numbers and slices of them: Encode cannot fail.
		panic(err)
	}
	return b.Bytes()
}

// writeJSON writes v as indented JSON, for the one-object outputs of tools
// and session.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine writes v as one compact JSON line.
func writeJSONLine(w io.Writer, v any) error {
	_, err := w.Write(marshalLine(v))
	return err
}

// output writes run's JSON lines from one goroutine it owns. Producers — the
// dispatcher's event callback on actor goroutines and the run loop — queue
// lines without blocking; the writer writes them in queue order and flushes
// whenever the queue is empty, so each line reaches the reader as soon as
// nothing else is waiting. Event, Results, Err and Close are safe for
// concurrent use.
type output struct {
	pretty bool // lines for people (--pretty) instead of JSON

	w    *bufio.Writer // used by the writer goroutine only
	wake chan struct{} // capacity 1: the queue has lines or output closed
	done chan struct{} // closed when the writer goroutine has ended

	mu     sync.Mutex
	queue  [][]byte // guarded by mu
	closed bool     // guarded by mu
	err    error    // guarded by mu: the first write error
}

// newOutputFor starts the writer goroutine on w, printing for people when
// pretty is set; Close stops it.
func newOutputFor(w io.Writer, pretty bool) *output {
	o := &output{pretty: pretty, w: bufio.NewWriterSize(w, 64<<10), wake: make(chan struct{}, 1), done: make(chan struct{})}
	go o.loop()
	return o
}

// Event queues one event line.
func (o *output) Event(ev *messages.Event) {
	if o.pretty {
		// The result line says what a tool_result event says.
		if ev.GetKind() != "tool_result" {
			o.push([]byte(prettyEvent(ev)))
		}
		return
	}
	o.push(marshalLine(eventJSON(ev)))
}

// TurnReply queues the results msgs of the calls of msg, turn turn: for
// people one line per result; as JSON Lines in shape s, one line per tool
// message or function_call_output item in order, or for ShapeAnthropic and
// ShapeGemini one line with the user message.
func (o *output) TurnReply(turn int64, msg *messages.AssistantMessage, msgs []*messages.ToolMessage, s messages.Shape) {
	if o.pretty {
		lines := make([][]byte, len(msgs))
		for i, m := range msgs {
			lines[i] = []byte(prettyResult(turn, m))
		}
		o.push(lines...)
		return
	}
	reply := messages.ReplyTo(msg, msgs, s)
	lines := make([][]byte, len(reply))
	for i, m := range reply {
		lines[i] = marshalLine(m)
	}
	o.push(lines...)
}

func (o *output) push(lines ...[]byte) {
	o.mu.Lock()
	if !o.closed {
		o.queue = append(o.queue, lines...)
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Err returns the first error writing the output.
func (o *output) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Close writes what is queued, stops the writer and returns the first write
// error. Lines queued afterwards are dropped.
func (o *output) Close() error {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	<-o.done
	return o.Err()
}

func (o *output) loop() {
	defer close(o.done)
	for {
		o.mu.Lock()
		lines, closed := o.queue, o.closed
		o.queue = nil
		o.mu.Unlock()
		for _, l := range lines {
			o.write(l)
		}
		if len(lines) == 0 {
			o.flush()
			if closed {
				return
			}
			<-o.wake
		}
	}
}

func (o *output) write(line []byte) {
	if o.Err() != nil {
		return
	}
	if _, err := o.w.Write(line); err != nil {
		o.setErr(err)
	}
}

func (o *output) flush() {
	if o.Err() != nil {
		return
	}
	if err := o.w.Flush(); err != nil {
		o.setErr(err)
	}
}

func (o *output) setErr(err error) {
	o.mu.Lock()
	if o.err == nil {
		o.err = err
	}
	o.mu.Unlock()
}
