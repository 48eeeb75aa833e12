package mcp

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Progress: every call carries a progressToken of its own, and each
// notifications/progress the server sends for it becomes a piece of the
// call's streamed output (a tool_call_text event), at most one per
// progressInterval: a server that reports progress without pause must not
// flood the event stream. The notifications themselves count against the
// flood budget like every message (limits.go).
const (
	// progressInterval is the least time between two progress lines of
	// one call; the updates in between are counted, not shown.
	progressInterval = 250 * time.Millisecond
	// maxProgressMessage bounds the server's message in one progress line.
	maxProgressMessage = 1 << 10
	// progressTokenPrefix starts every progress token the client sends.
	progressTokenPrefix = "tooldispatch-"
)

// inflight is a call sent to the server and not yet answered: where its
// progress goes.
type inflight struct {
	call *toolkit.Call
	conn *conn
	ctx  context.Context // the call's: it ends when the call stops waiting

	// mu is held while a progress line is emitted, and by done: nothing is
	// emitted once the call's handler may have returned.
	mu      sync.Mutex
	shown   time.Time // guarded by mu; when the last progress line was emitted
	skipped int       // guarded by mu; updates not shown since
	ended   bool      // guarded by mu; the call's answer came (or it gave up)
}

// track registers c as sent on conn, within ctx, under a new progress
// token; done unregisters it once its answer came (nothing it streams is
// shown after).
func (s *server) track(ctx context.Context, c *toolkit.Call, conn *conn) (token string, f *inflight, done func()) {
	token = progressTokenPrefix + strconv.FormatInt(s.tokens.Add(1), 10)
	f = &inflight{call: c, conn: conn, ctx: ctx}
	s.mu.Lock()
	s.calls[token] = f
	s.mu.Unlock()
	return token, f, func() {
		s.mu.Lock()
		delete(s.calls, token)
		s.mu.Unlock()
		f.mu.Lock()
		f.ended = true
		f.mu.Unlock()
	}
}

// lookup returns the call sent with token, or nil.
func (s *server) lookup(token any) *inflight {
	t, ok := token.(string)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[t]
}

// onProgress is the SDK's handler of progress notifications (of a
// Streamable HTTP server; the others' are tapped, tap.go).
func (s *server) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req != nil && req.Params != nil {
		s.progressUpdate(req.Params)
	}
}

// progressUpdate streams a progress notification to the call it names; one
// for no call in flight (a late one, a made-up token) is dropped.
func (s *server) progressUpdate(p *mcp.ProgressNotificationParams) {
	if f := s.lookup(p.ProgressToken); f != nil {
		f.progress(s.m.now(), p.Progress, p.Total, p.Message)
	}
}

// progress emits one progress line for the call, unless one was emitted
// less than progressInterval before now; then it only counts the update.
func (f *inflight) progress(now time.Time, progress, total float64, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.ended:
		return
	case !f.shown.IsZero() && now.Sub(f.shown) < progressInterval:
		f.skipped++
		return
	}
	skipped := f.skipped
	f.shown, f.skipped = now, 0
	// Redacted whole, then cut (oneLine).
	f.call.Emit(progressLine(progress, total, f.call.Redact(message), skipped))
}

// progressLine renders a progress update as one line of text: the
// server's message on one line, bounded.
func progressLine(progress, total float64, message string, skipped int) string {
	var b strings.Builder
	b.WriteString("progress ")
	b.WriteString(strconv.FormatFloat(progress, 'f', -1, 64))
	if total > 0 {
		b.WriteString("/")
		b.WriteString(strconv.FormatFloat(total, 'f', -1, 64))
	}
	if m := oneLine(message, maxProgressMessage); m != "" {
		b.WriteString(": ")
		b.WriteString(m)
	}
	if skipped > 0 {
		fmt.Fprintf(&b, " (%d earlier updates not shown)", skipped)
	}
	b.WriteString("\n")
	return b.String()
}

// oneLine makes a server's text one bounded line: control characters
// (line breaks included) become spaces, invalid UTF-8 is replaced, and it
// is cut at limit bytes with a note.
func oneLine(s string, limit int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	return capWith(strings.TrimSpace(s), limit, " [… cut at %s of %s]")
}
