package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// ResumeTask learns, after a restart, the outcome of a call of the
// registered MCP tool c.Name that ran as the task taskID before the
// dispatcher stopped (the id learned at at, kept in the call's intent
// record): it waits for the tool's server to be up, asks tasks/get, polls
// a task still working as a call does, and fetches the result of one that
// ended with tasks/result. It returns what the tool's handler would have:
// the result of a completed task, a *ToolError for a failed one, an error
// wrapping toolkit.ErrCanceled for one the server cancelled.
//
// It is bounded by the call's own deadline (at plus the server's call
// timeout) or, when that is nearer, one connect timeout of the server from
// now: a task still working then is cancelled (tasks/cancel) and the error
// wraps context.DeadlineExceeded, as a call that timed out. It does not
// learn the outcome (the error wraps toolkit.ErrOutcomeUnknown) when no
// configured server has the tool's name, the server is not up within that
// bound or failed for good, its connection cannot follow tasks (Streamable
// HTTP), it answers tasks/get with an error (it no longer knows the task:
// a server restarted without keeping its tasks, a task past its ttl) or
// about another task.
func (m *Manager) ResumeTask(ctx context.Context, taskID string, at time.Time, c *toolkit.Call) (toolkit.Result, error) {
	s, mcpName := m.serverOfTool(c.Name)
	if s == nil {
		return toolkit.Result{}, fmt.Errorf("no configured MCP server has the tool %s, so task %q could not be asked about: %w",
			c.Name, oneLine(taskID, 128), toolkit.ErrOutcomeUnknown)
	}
	deadline := at.Add(s.cfg.Timeout)
	if floor := time.Now().Add(s.cfg.ConnectTimeout); deadline.Before(floor) {
		deadline = floor
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	stop := context.AfterFunc(m.ctx, cancel)
	defer stop()
	for {
		res, err := s.resume(ctx, mcpName, taskID, c)
		if errors.Is(err, errTapClosed) && ctx.Err() == nil {
			continue // the session ended: ask the next one
		}
		return res, err
	}
}

// serverOfTool returns the server whose tool the registered name names, and
// the tool's name on the server; nil when no server has that name.
func (m *Manager) serverOfTool(name string) (*server, string) {
	server, ok := ServerOf(name)
	if !ok {
		return nil, ""
	}
	for _, s := range m.servers {
		if s.name != server {
			continue
		}
		s.mu.Lock()
		r, ok := s.tools[name]
		s.mu.Unlock()
		if ok {
			return s, r.mcpName
		}
		// Not listed now (still starting): the name's own tool part.
		return s, strings.TrimPrefix(name, toolPrefix+server+nameSep)
	}
	return nil, ""
}

// resume makes one attempt of ResumeTask on the server's current session.
func (s *server) resume(ctx context.Context, mcpName, taskID string, c *toolkit.Call) (toolkit.Result, error) {
	id := oneLine(taskID, 128)
	_, conn, err := s.await(ctx)
	if err != nil {
		return toolkit.Result{}, fmt.Errorf("MCP server %q was not up to be asked about task %q of %s (%v): %w", s.name, id, mcpName, err, toolkit.ErrOutcomeUnknown)
	}
	if conn.tap == nil {
		return toolkit.Result{}, fmt.Errorf("MCP server %q is connected over Streamable HTTP, which cannot follow task %q: %w", s.name, id, toolkit.ErrOutcomeUnknown)
	}
	raw, err := conn.tap.request(ctx, methodTaskGet, map[string]string{"taskId": taskID})
	var werr *jsonrpc.Error
	switch {
	case errors.Is(err, errTapClosed):
		return toolkit.Result{}, err
	case errors.As(err, &werr):
		return toolkit.Result{}, fmt.Errorf("MCP server %q no longer knows task %q of %s (%s: %s): %w", s.name, id, mcpName, methodTaskGet, oneLine(werr.Message, maxTaskStatus), toolkit.ErrOutcomeUnknown)
	case err != nil:
		return toolkit.Result{}, fmt.Errorf("MCP server %q did not answer %s of task %q of %s (%v): %w", s.name, methodTaskGet, id, mcpName, err, toolkit.ErrOutcomeUnknown)
	}
	st, err := readTaskState(raw, taskID)
	if err != nil {
		return toolkit.Result{}, fmt.Errorf("MCP server %q: %s of task %q of %s: %w", s.name, methodTaskGet, id, mcpName, err)
	}
	s.log.Info().Str("tool", mcpName).Str("task", id).Str("status", oneLine(st.Status, 64)).Msg("MCP task of an interrupted call looked up")
	res, err := s.awaitTask(ctx, conn.tap, mcpName, c, st)
	if err != nil {
		return toolkit.Result{}, err
	}
	return s.toResult(res, mcpName, c)
}
