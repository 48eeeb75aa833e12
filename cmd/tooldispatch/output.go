package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
)

// eventLine is an event as run prints it.
type eventLine struct {
	Event     string `json:"event"`
	Session   string `json:"session"`
	Run       string `json:"run"`
	Turn      int64  `json:"turn"`
	CallID    string `json:"call_id"`
	Tool      string `json:"tool"`
	Seq       uint64 `json:"seq"`
	Time      string `json:"time"`
	Text      string `json:"text,omitempty"`
	Status    string `json:"status,omitempty"`
	ArgsHash  string `json:"args_hash,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	Injected  string `json:"injected,omitempty"`
}

// toolMessageJSON is a tool message in the OpenAI shape, with its status.
type toolMessageJSON struct {
	Role       string `json:"role"`
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
	Status     string `json:"status"`
	Content    string `json:"content"`
	Injected   string `json:"injected,omitempty"`
}

// assistantJSON is an assistant message in the OpenAI shape.
type assistantJSON struct {
	Role      string         `json:"role"`
	Content   string         `json:"content"`
	ToolCalls []toolCallJSON `json:"tool_calls,omitempty"`
}

type toolCallJSON struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionJSON `json:"function"`
}

type functionJSON struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

func eventJSON(ev *messages.Event) eventLine {
	return eventLine{
		Event: ev.GetKind(), Session: ev.GetSession(), Run: ev.GetRun(), Turn: ev.GetTurn(),
		CallID: ev.GetCallId(), Tool: ev.GetTool(), Seq: ev.GetSeq(),
		Time: time.Unix(0, ev.GetTimeUnixNano()).UTC().Format(time.RFC3339Nano),
		Text: ev.GetText(), Status: ev.GetStatus(), ArgsHash: ev.GetArgsHash(),
		Arguments: ev.GetArguments(), Injected: ev.GetInjected(),
	}
}

func toolJSON(m *messages.ToolMessage) toolMessageJSON {
	role := m.GetRole()
	if role == "" {
		role = "tool"
	}
	return toolMessageJSON{Role: role, ToolCallID: m.GetToolCallId(), Name: m.GetName(),
		Status: m.GetStatus(), Content: m.GetContent(), Injected: m.GetInjected()}
}

func assistantMessageJSON(m *messages.AssistantMessage) assistantJSON {
	out := assistantJSON{Role: m.GetRole(), Content: m.GetContent()}
	if out.Role == "" {
		out.Role = "assistant"
	}
	for _, c := range m.GetToolCalls() {
		out.ToolCalls = append(out.ToolCalls, toolCallJSON{ID: c.GetId(), Type: c.GetType(),
			Function: functionJSON{Name: c.GetFunction().GetName(), Arguments: c.GetFunction().GetArguments()}})
	}
	return out
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
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
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

// newOutput starts the writer goroutine on w; Close stops it.
func newOutput(w io.Writer) *output { return newOutputFor(w, false) }

// newOutputFor is newOutput printing for people when pretty is set.
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

// Results queues one line per tool message, in order.
func (o *output) Results(msgs []*messages.ToolMessage) { o.TurnResults(0, msgs) }

// TurnResults queues one line per tool message of turn, in order.
func (o *output) TurnResults(turn int64, msgs []*messages.ToolMessage) {
	lines := make([][]byte, len(msgs))
	for i, m := range msgs {
		if o.pretty {
			lines[i] = []byte(prettyResult(turn, m))
			continue
		}
		lines[i] = marshalLine(toolJSON(m))
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
