package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Methods and notifications the tap looks at.
const (
	methodProgress   = "notifications/progress"
	methodLog        = "notifications/message"
	methodCallTool   = "tools/call"
	methodListTools  = "tools/list"
	methodTaskStatus = "notifications/tasks/status" // 2025-11-25 tasks
	methodTasks      = "notifications/tasks"        // the 2026-07-28 tasks extension
)

// tapTransport wraps the transport of a stdio or in-process server: what
// the server sends passes through the tap, in the order it was sent,
// before the SDK reads it, and what we send passes through it before the
// server does. The tap
//   - handles progress and log notifications in order: the SDK hands
//     notifications to their handlers on a goroutine of their own, so a
//     progress notification sent before a call's answer could be handled
//     after the call returned (and its output ended);
//   - records the execution.taskSupport of each tool a listing names,
//     which the SDK's Tool type drops;
//   - turns a call marked to run as a task into a task-augmented
//     tools/call (2025-11-25: params.task), and a task handle the server
//     answers a call with (2025-11-25: {"task": …}; the 2026-07-28 tasks
//     extension: resultType "task") into a CallToolResult carrying the task
//     under a key of this connection's own in _meta, which the SDK keeps.
//
// (A Streamable HTTP connection cannot be wrapped: the SDK tells it of the
// session through a method of its own type. Its notifications go through
// the SDK's handlers, a progress update handled after its call's answer is
// dropped, and its tools are not run as tasks.)
type tapTransport struct {
	base mcp.Transport
	s    *server
	c    *conn
}

// Connect connects the wrapped transport and taps the connection.
func (t *tapTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	base, err := t.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.c.tap = newTap(t.s)
	t.c.tap.conn = base
	return &tapConn{Connection: base, tap: t.c.tap}, nil
}

// tap is the state of one tapped connection. Safe for concurrent use.
type tap struct {
	s *server
	// key is this connection's _meta key for a call to run as a task (on
	// its params) and for the task the server made of it (on its result):
	// random, so a server cannot forge either.
	key string

	// conn is the tapped connection, for the requests of our own the SDK
	// does not make (tasks/get, tasks/result, tasks/cancel).
	conn mcp.Connection
	ids  atomic.Int64

	mu          sync.Mutex
	sent        map[jsonrpc.ID]string                 // guarded by mu; method of each listing and call sent and not answered
	own         map[jsonrpc.ID]chan *jsonrpc.Response // guarded by mu; our own requests waiting for their answer
	closed      bool                                  // guarded by mu; the connection's reading ended
	taskSupport map[string]string                     // guarded by mu; execution.taskSupport by tool, from the listings
}

// sentTaskCall marks, among the requests sent, a tools/call made a task:
// only its answer may be a task handle.
const sentTaskCall = "tools/call as a task"

// maxSent bounds the requests whose method the tap keeps: an answer that
// never comes (a call given up on) must not make it grow without end.
const maxSent = 4096

// errTapClosed: the connection closed before our own request was answered.
var errTapClosed = errors.New("the connection to the server closed")

func newTap(s *server) *tap {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &tap{s: s, key: "tooldispatch/task-" + hex.EncodeToString(b[:]),
		sent: map[jsonrpc.ID]string{}, own: map[jsonrpc.ID]chan *jsonrpc.Response{}, taskSupport: map[string]string{}}
}

// support is the execution.taskSupport the server's listing gave tool
// ("" when none).
func (t *tap) support(tool string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.taskSupport[tool]
}

// tapConn is a tapped connection.
type tapConn struct {
	mcp.Connection
	tap *tap
}

// Write sends msg, after noting a request's method and rewriting a call
// marked to run as a task.
func (c *tapConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
		kind := req.Method
		if req.Method == methodCallTool {
			var asTask bool
			if req, asTask = c.tap.augment(req); asTask {
				msg, kind = req, sentTaskCall
			}
		}
		if kind == sentTaskCall || kind == methodListTools {
			c.tap.mu.Lock()
			if len(c.tap.sent) < maxSent {
				c.tap.sent[req.ID] = kind
			}
			c.tap.mu.Unlock()
		}
	}
	return c.Connection.Write(ctx, msg)
}

// Read returns the next message for the SDK, after handling those the tap
// takes: progress and log notifications are handled here, task status
// notifications dropped (tasks are polled), answers to listings and calls
// looked at.
func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			c.tap.close()
			return msg, err
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			if c.tap.ownAnswer(m) {
				continue
			}
			return c.tap.answer(m), nil
		case *jsonrpc.Request:
			if m.ID.IsValid() || !c.tap.notification(m) {
				return msg, nil
			}
		default:
			return msg, nil
		}
	}
}

// notification handles a notification the tap takes, and reports whether
// it did.
func (t *tap) notification(req *jsonrpc.Request) bool {
	switch req.Method {
	case methodProgress:
		var p mcp.ProgressNotificationParams
		if json.Unmarshal(req.Params, &p) == nil {
			t.s.progressUpdate(&p)
		}
	case methodLog:
		//lint:ignore SA1019 logging is deprecated from 2026-07-28 only; servers of 2025-11-25 and older still log this way
		var p mcp.LoggingMessageParams
		if json.Unmarshal(req.Params, &p) == nil {
			t.s.logMessage(&p)
		}
	case methodTaskStatus, methodTasks:
	default:
		return false
	}
	return true
}

// augment rewrites a tools/call whose _meta holds the tap's key into a
// task-augmented call (2025-11-25: params.task with the key's value as its
// ttl in milliseconds), the key removed; it reports whether it did.
func (t *tap) augment(req *jsonrpc.Request) (*jsonrpc.Request, bool) {
	if !bytes.Contains(req.Params, []byte(t.key)) {
		return req, false
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(req.Params, &params) != nil {
		return req, false
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(params["_meta"], &meta) != nil {
		return req, false
	}
	ttl, ok := meta[t.key]
	if !ok {
		return req, false
	}
	delete(meta, t.key)
	if len(meta) == 0 {
		delete(params, "_meta")
	} else if b, err := json.Marshal(meta); err == nil {
		params["_meta"] = b
	}
	params["task"] = json.RawMessage(`{"ttl":` + string(ttl) + `}`)
	b, err := json.Marshal(params)
	if err != nil {
		return req, false
	}
	out := *req
	out.Params = b
	return &out, true
}

// answer looks at the answer to a request we sent: a listing's tools'
// taskSupport is recorded, a task handle a call was answered with is
// moved under the tap's key in _meta.
func (t *tap) answer(resp *jsonrpc.Response) *jsonrpc.Response {
	t.mu.Lock()
	method := t.sent[resp.ID]
	delete(t.sent, resp.ID)
	t.mu.Unlock()
	if resp.Error != nil || len(resp.Result) == 0 {
		return resp
	}
	switch method {
	case methodListTools:
		t.listing(resp.Result)
	case sentTaskCall:
		if task := taskHandle(resp.Result); task != nil {
			b, err := json.Marshal(map[string]any{"content": []any{}, "_meta": map[string]json.RawMessage{t.key: task}})
			if err == nil {
				out := *resp
				out.Result = b
				return &out
			}
		}
	}
	return resp
}

// listing records the execution.taskSupport of a listing's tools.
func (t *tap) listing(result json.RawMessage) {
	if !bytes.Contains(result, []byte(`"taskSupport"`)) {
		return
	}
	var page struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	if json.Unmarshal(result, &page) != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tool := range page.Tools {
		if tool.Execution.TaskSupport != "" && len(t.taskSupport) < maxListTools {
			t.taskSupport[tool.Name] = tool.Execution.TaskSupport
		}
	}
}

// taskHandle returns the task a tools/call result hands back instead of
// the tool's result (2025-11-25: its "task" object; the 2026-07-28
// extension: the result itself, resultType "task"), nil when it is a
// result.
func taskHandle(result json.RawMessage) json.RawMessage {
	if !bytes.Contains(result, []byte(`"task`)) {
		return nil
	}
	var r struct {
		ResultType string          `json:"resultType"`
		Task       json.RawMessage `json:"task"`
		Content    json.RawMessage `json:"content"`
	}
	if json.Unmarshal(result, &r) != nil {
		return nil
	}
	switch {
	case r.ResultType == "task":
		return result
	case len(r.Task) > 0 && r.Task[0] == '{' && r.Content == nil:
		return r.Task
	}
	return nil
}

// request sends a request of our own on the connection and waits for its
// answer's result, ctx's end, or the connection's close.
func (t *tap) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	// A string id of our own: the SDK's are numbers.
	id, err := jsonrpc.MakeID(t.key + "/" + strconv.FormatInt(t.ids.Add(1), 10))
	if err != nil {
		return nil, err
	}
	ch := make(chan *jsonrpc.Response, 1)
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errTapClosed
	}
	t.own[id] = ch
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.own, id)
		t.mu.Unlock()
	}()
	if err := t.conn.Write(ctx, &jsonrpc.Request{ID: id, Method: method, Params: b}); err != nil {
		return nil, err
	}
	select {
	case resp := <-ch:
		if resp == nil {
			return nil, errTapClosed
		}
		if resp.Error != nil {
			return nil, resp.Error
		}
		return resp.Result, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ownAnswer hands an answer to one of our own requests to its waiter, and
// reports whether it was one.
func (t *tap) ownAnswer(resp *jsonrpc.Response) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch, ok := t.own[resp.ID]
	if ok {
		delete(t.own, resp.ID)
		ch <- resp
	}
	return ok
}

// close ends the waits of our own requests: no answer will come.
func (t *tap) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for id, ch := range t.own {
		delete(t.own, id)
		close(ch)
	}
}
