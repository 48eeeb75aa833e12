package mcp

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Notifications the tap takes.
const (
	// methodProgress is the notification of a request's progress.
	methodProgress = "notifications/progress"
	// methodLog is a server's log message.
	methodLog = "notifications/message"
)

// tapTransport wraps the transport of a stdio or in-process server: what
// the server sends passes through the server's tap, in the order it was
// sent, before the SDK reads it. The SDK hands notifications to their
// handlers on a goroutine of their own, so a progress notification sent
// before a call's answer could be handled after the call returned (and its
// output ended); tapped, it is handled before the answer is read, and so
// is a log message. (A Streamable HTTP connection cannot be wrapped: the
// SDK tells it of the session through a method of its own type. Its
// notifications go through the SDK's handlers, and a progress update
// handled after its call's answer is dropped.)
type tapTransport struct {
	base mcp.Transport
	s    *server
}

// Connect connects the wrapped transport and taps the connection.
func (t *tapTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &tapConn{Connection: c, s: t.s}, nil
}

// tapConn is a tapped connection.
type tapConn struct {
	mcp.Connection
	s *server
}

// Read returns the next message for the SDK, after handling those the tap
// takes: progress notifications are streamed to their call here.
func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return msg, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || req.ID.IsValid() {
			return msg, nil
		}
		switch req.Method {
		case methodProgress:
			var p mcp.ProgressNotificationParams
			if json.Unmarshal(req.Params, &p) == nil {
				c.s.progressUpdate(&p)
			}
		case methodLog:
			var p mcp.LoggingMessageParams
			if json.Unmarshal(req.Params, &p) == nil {
				c.s.logMessage(&p)
			}
		default:
			return msg, nil
		}
	}
}
