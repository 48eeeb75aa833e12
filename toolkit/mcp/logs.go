package mcp

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// A server's notifications/message go to our log at the level the server
// gives, with the server's name, as data of their own: zerolog writes each
// as a JSON string field, so no text of the server's can end a line or
// forge a field. What a server may log is bounded: each message is cut at
// maxLogData (redacted whole first), and at most logBudget messages of a
// server are written per logWindow; the rest are counted and the count is
// logged when the window ends. A log flood also counts against the flood
// budget of the session (limits.go), which ends it.
const (
	// logWindow and logBudget bound how many of a server's log messages
	// are written.
	logWindow = 10 * time.Second
	logBudget = 100
	// maxLogData bounds one log message's data, as text.
	maxLogData = 4 << 10
	// maxLoggerName bounds the name of the server's logger.
	maxLoggerName = 128
)

// logGate is a server's budget of log messages. Safe for concurrent use.
type logGate struct {
	mu      sync.Mutex
	start   time.Time // guarded by mu; of the current window
	written int       // guarded by mu
	dropped int       // guarded by mu; in the current window
}

// admit reports whether a log message received now may be written, and
// how many were dropped in the window that now ended (to be logged once).
func (g *logGate) admit(now time.Time) (ok bool, droppedBefore int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Sub(g.start) >= logWindow {
		droppedBefore = g.dropped
		g.start, g.written, g.dropped = now, 0, 0
	}
	if g.written >= logBudget {
		g.dropped++
		return false, droppedBefore
	}
	g.written++
	return true, droppedBefore
}

// onLog is the SDK's handler of log notifications (of a Streamable HTTP
// server; the others' are tapped, tap.go).
func (s *server) onLog(_ context.Context, req *mcp.LoggingMessageRequest) {
	if req != nil && req.Params != nil {
		s.logMessage(req.Params)
	}
}

// logMessage writes a server's log notification to the log.
//
//lint:ignore SA1019 logging is deprecated from 2026-07-28 only; servers of 2025-11-25 and older still log this way
func (s *server) logMessage(p *mcp.LoggingMessageParams) {
	ok, dropped := s.logs.admit(s.m.now())
	if dropped > 0 {
		s.log.Warn().Int("dropped", dropped).Dur("window", logWindow).
			Msgf("MCP server sent more than %d log messages within %s; the rest were not logged", logBudget, logWindow)
	}
	if !ok {
		return
	}
	var data string
	switch d := p.Data.(type) {
	case string:
		data = d
	default:
		b, err := json.Marshal(d)
		if err != nil {
			return
		}
		data = string(b)
	}
	// Redacted whole, then cut.
	data = capWith(s.m.redact(data), maxLogData, " [… cut at %s of %s]")
	ev := s.log.WithLevel(logLevel(p.Level))
	if ev == nil {
		return
	}
	ev = ev.Str("mcp_level", oneLine(string(p.Level), 32))
	if p.Logger != "" {
		ev = ev.Str("mcp_logger", oneLine(p.Logger, maxLoggerName))
	}
	ev.Str("data", data).Msg("MCP server log")
}

// logLevel is our level for an MCP (syslog) level; an unknown level logs
// at info.
//
//lint:ignore SA1019 logging is deprecated from 2026-07-28 only; servers of 2025-11-25 and older still log this way
func logLevel(l mcp.LoggingLevel) zerolog.Level {
	switch l {
	case "debug":
		return zerolog.DebugLevel
	case "warning":
		return zerolog.WarnLevel
	case "error", "critical", "alert", "emergency":
		return zerolog.ErrorLevel
	}
	return zerolog.InfoLevel
}
