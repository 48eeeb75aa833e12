package mcp

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds on what a server may send. A server is untrusted: it could list
// tools without end, send one message without end, or flood the session
// with notifications and requests. Going over a bound that a well-behaved
// server never comes near (the listing's, the flood budget) marks the
// server failed (StateFailed) without retry: the same server would do the
// same again. A message over maxMessageBytes ends the session, and the
// server is restarted as after a crash (one tool's giant result must not
// cost the server for good). Bounds on one tool (its description, its
// schema) are repaired or skip that tool only.
const (
	// maxListPages bounds the pages of one listing of the tools.
	maxListPages = 100
	// maxListTools bounds the tools of one listing.
	maxListTools = 1000
	// maxListBytes bounds one listing's pages, as JSON.
	maxListBytes = 8 << 20
	// maxMessageBytes bounds one message from the server (a stdio line, an
	// HTTP body, a server-sent event): the SDK's own limit for stdio lines
	// and events, which it does not apply to HTTP bodies.
	maxMessageBytes = 16 << 20
	// floodWindow, floodMessages and floodBytes are the flood budget: a
	// server may send at most floodMessages messages and floodBytes bytes
	// within each floodWindow (replies to our requests included). It
	// bounds the work and the memory a server's messages cost us, even
	// while a server that does not read makes our replies to its requests
	// queue.
	floodWindow   = 10 * time.Second
	floodMessages = 10_000
	floodBytes    = 256 << 20
	// maxDescriptionBytes bounds a tool's description (longer ones are cut
	// with a note): it is sent to the model.
	maxDescriptionBytes = 8 << 10
	// maxSchemaBytes bounds a tool's input schema; a tool with a larger
	// one is skipped (ServerStatus.Skipped).
	maxSchemaBytes = 64 << 10
	// relistInterval is the least time between two listings of a server's
	// tools, however often it says its list changed.
	relistInterval = time.Second
)

var (
	// ErrOverLimit: the server went over a bound of its listing or the
	// flood budget; it is marked failed and not retried.
	ErrOverLimit = errors.New("mcp: the server went over a limit")
	// ErrMessageTooLong: the server sent a message over maxMessageBytes;
	// the session ends.
	ErrMessageTooLong = errors.New("mcp: message too long")
)

// overLimit is an ErrOverLimit saying which bound and by how much.
func overLimit(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrOverLimit)
}

// meter counts a session's incoming messages and bytes against the flood
// budget, and records the first bound the server broke. Safe for
// concurrent use.
type meter struct {
	// onOver is called once, with the error, when the server first breaks
	// a bound.
	onOver func(error)
	now    func() time.Time
	// maxMessages and maxBytes are the budget of a window: floodMessages
	// and floodBytes.
	maxMessages, maxBytes int

	// received counts every byte received, across windows.
	received atomic.Int64

	mu       sync.Mutex
	start    time.Time // guarded by mu; of the current window
	messages int       // guarded by mu
	bytes    int       // guarded by mu
	err      error     // guarded by mu; the first bound broken
}

func newMeter(onOver func(error)) *meter {
	return &meter{onOver: onOver, now: time.Now, maxMessages: floodMessages, maxBytes: floodBytes}
}

// add counts messages and bytes received now. It returns the error of the
// first bound broken, once the flood budget of the window is spent or a
// bound was broken before.
func (m *meter) add(messages, bytes int) error {
	m.received.Add(int64(bytes))
	m.mu.Lock()
	if m.err != nil {
		err := m.err
		m.mu.Unlock()
		return err
	}
	now := m.now()
	if now.Sub(m.start) >= floodWindow {
		m.start, m.messages, m.bytes = now, 0, 0
	}
	m.messages += messages
	m.bytes += bytes
	within := m.messages <= m.maxMessages && m.bytes <= m.maxBytes
	m.mu.Unlock()
	if within {
		return nil
	}
	return m.over(overLimit("flood: the server sent more than %d messages or %s within %s", m.maxMessages, sizeText(m.maxBytes), floodWindow))
}

// over records that the server broke a bound (err, an ErrOverLimit) and
// returns the first bound it broke.
func (m *meter) over(err error) error {
	m.mu.Lock()
	first := m.err == nil
	if first {
		m.err = err
	}
	err = m.err
	m.mu.Unlock()
	if first && m.onOver != nil {
		m.onOver(err)
	}
	return err
}
