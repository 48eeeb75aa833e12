package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// objectSchema is the schema of a tool that declares none.
const objectSchema = `{"type":"object"}`

// apply registers list as the server's tools: new and changed tools are
// registered (ReplaceOrMark), tools the server no longer lists are removed.
// Only this server's tools are touched. The tools it cannot register are
// skipped, with the reason (ServerStatus.Skipped).
func (s *server) apply(list []*mcp.Tool) {
	want := make(map[string]registered, len(list))
	tools := make(map[string]toolkit.Tool, len(list))
	var skipped []SkippedTool
	skip := func(tool, reason string) {
		skipped = append(skipped, SkippedTool{Tool: tool, Reason: reason})
		s.log.Warn().Str("tool", tool).Str("reason", reason).Msg("MCP tool skipped")
	}
	for _, t := range list {
		if t == nil {
			continue
		}
		name, err := ToolName(s.name, t.Name)
		if err != nil {
			skip(t.Name, err.Error())
			continue
		}
		if prev, dup := want[name]; dup {
			skip(t.Name, fmt.Sprintf("another tool of the server, %q, has the same registered name %s", prev.mcpName, name))
			continue
		}
		tool, info, err := s.toolkitTool(name, t)
		if err != nil {
			skip(t.Name, err.Error())
			continue
		}
		want[name], tools[name] = info, tool
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for name, info := range want {
		if old, ok := s.tools[name]; ok && old == info {
			continue
		}
		if err := s.m.reg.ReplaceOrMark(tools[name]); err != nil {
			skip(info.mcpName, "the registry refused it: "+err.Error())
			delete(want, name)
		}
	}
	removed := 0
	for name := range s.tools {
		if _, keep := want[name]; !keep {
			s.m.reg.Remove(name)
			removed++
		}
	}
	s.tools = want
	s.skipped = skipped
	s.log.Debug().Int("tools", len(want)).Int("removed", removed).Msg("MCP tools registered")
}

// toolkitTool builds the registry entry of one MCP tool.
func (s *server) toolkitTool(name string, t *mcp.Tool) (toolkit.Tool, registered, error) {
	schema := []byte(objectSchema)
	if t.InputSchema != nil {
		b, err := json.Marshal(t.InputSchema)
		if err != nil {
			return toolkit.Tool{}, registered{}, fmt.Errorf("inputSchema: %w", err)
		}
		if len(b) > maxSchemaBytes {
			return toolkit.Tool{}, registered{}, fmt.Errorf("its input schema of %s is over the %s a tool's schema may have", sizeText(len(b)), sizeText(maxSchemaBytes))
		}
		schema = b
	}
	outSchema, err := outputSchemaOf(t)
	if err != nil {
		return toolkit.Tool{}, registered{}, err
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	if desc == "" && t.Annotations != nil {
		desc = t.Annotations.Title
	}
	if desc == "" {
		desc = fmt.Sprintf("Tool %s of the MCP server %s.", t.Name, s.name)
	}
	desc = capDescription(desc)
	hints := s.hints(t)
	info := registered{
		mcpName:   t.Name,
		hints:     hints,
		schema:    string(schema),
		outSchema: string(outSchema),
		desc:      desc,
	}
	return toolkit.Tool{
		Name:         name,
		Description:  desc,
		Schema:       schema,
		OutputSchema: outSchema,
		// Alone, in call order, unless the operator lets a trusted
		// server's read-only tools run beside others.
		Concurrent: hints.concurrent,
		// A program's own choice for its in-process servers.
		AlwaysInArray: s.cfg.AlwaysInArray,
		ReadOnly:      hints.readOnly,
		Timeout:       s.cfg.Timeout,
		NoDedup:       s.cfg.NoDedup || hints.notIdempotent,
		// A write of the server makes what its reads returned stale.
		DedupScope:  toolPrefix + s.name + nameSep,
		ConfirmNote: hints.note,
		Handler:     s.handler(t.Name),
		Source:      toolkit.SourceMCP,
	}, info, nil
}

// handler runs calls of the MCP tool mcpName.
func (s *server) handler(mcpName string) toolkit.Handler {
	return func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
		for {
			sess, conn, err := s.await(ctx)
			if err != nil {
				return toolkit.Result{}, err
			}
			res, err := s.send(ctx, sess, conn, mcpName, c)
			if errors.Is(err, mcp.ErrConnectionClosed) {
				// The session was closing or broken before the request was
				// written: the call was not sent. It waits for the next
				// session, up to its own time.
				s.mu.Lock()
				conn.broken.Store(true)
				s.mu.Unlock()
				s.log.Debug().Err(err).Str("tool", mcpName).Msg("MCP call not sent: the session was closing; waiting for the next one")
				continue
			}
			return res, err
		}
	}
}

// send makes one attempt at the call c of mcpName on sess.
func (s *server) send(ctx context.Context, sess *mcp.ClientSession, conn *conn, mcpName string, c *toolkit.Call) (toolkit.Result, error) {
	args := json.RawMessage(c.Args.Canonical)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	callCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	stop := context.AfterFunc(s.m.ctx, cancel)
	defer stop()

	if h := s.m.hooks.call; h != nil {
		h(s.name, mcpName, conn.pid())
	}
	token, f, untrack := s.track(callCtx, c, conn)
	params := &mcp.CallToolParams{Name: mcpName, Arguments: args}
	params.SetProgressToken(token)
	// A tool that must run as a task is marked for the tap to call it as
	// one (tasks.go).
	asTask := conn.tap != nil && s.asTask(conn.tap.support(mcpName))
	if asTask {
		params.Meta[conn.tap.key] = s.cfg.Timeout.Milliseconds()
	}
	began := time.Now()
	s.inflight.Add(1)
	res, err := sess.CallTool(withInflight(callCtx, f), params)
	if err == nil && asTask {
		var st *taskState
		if st, err = taskOf(res, conn.tap.key); err == nil && st != nil {
			// Kept in the call's intent record before anything else, so
			// that a restart can ask for the task's outcome (resume.go).
			if len(st.TaskID) > maxTaskID {
				s.log.Warn().Str("tool", mcpName).Int("bytes", len(st.TaskID)).
					Msg("the MCP task's id is too long to keep: a crash during the task would leave its outcome unknown")
			} else if nerr := c.NoteTask(callCtx, st.TaskID); nerr != nil {
				s.log.Warn().Err(nerr).Str("tool", mcpName).Str("task", oneLine(st.TaskID, 128)).
					Msg("the MCP task's id was not recorded: a crash during the task would leave its outcome unknown")
			}
			res, err = s.awaitTask(callCtx, conn.tap, mcpName, c, st)
			var te *ToolError
			if err != nil && (callCtx.Err() != nil || errors.As(err, &te) || errors.Is(err, toolkit.ErrCanceled) || errors.Is(err, errOtherTask)) {
				// Cancelled at the call's end, ended by the server, or
				// a server that answered about another task.
				s.inflight.Add(-1)
				untrack()
				return toolkit.Result{}, err
			}
		}
	}
	s.inflight.Add(-1)
	untrack()
	elapsed := time.Since(began)
	if errors.Is(err, mcp.ErrConnectionClosed) {
		return toolkit.Result{}, err
	}
	if err != nil {
		return toolkit.Result{}, s.callError(ctx, callCtx, conn, mcpName, elapsed, err)
	}
	s.log.Debug().Str("tool", mcpName).Dur("elapsed", elapsed).Bool("is_error", res.IsError).Msg("MCP call ended")
	return s.toResult(res, mcpName, c)
}

// toResult is the call's result of what the server answered (a tool
// result, or a task's tasks/result).
func (s *server) toResult(res *mcp.CallToolResult, mcpName string, c *toolkit.Call) (toolkit.Result, error) {
	if res.IsError {
		// Redacted whole, then cut: no cut leaves part of a secret.
		text, _ := joinResult(res, "")
		return toolkit.Result{}, &ToolError{Server: s.name, Tool: mcpName, Text: capText(c.Redact(text), s.cfg.MaxResultBytes)}
	}
	structured, err := s.structured(res, mcpName, s.outputSchema(c.Name))
	if err != nil {
		return toolkit.Result{}, err
	}
	text, parts := joinResult(res, structured)
	return toolkit.Result{Content: capText(c.Redact(text), s.cfg.MaxResultBytes), Parts: parts}, nil
}

// outputSchema is the output schema of the registered tool name, nil when
// it declares none.
func (s *server) outputSchema(name string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.tools[name]; ok && r.outSchema != "" {
		return []byte(r.outSchema)
	}
	return nil
}

// callError explains why a call returned no result.
func (s *server) callError(ctx, callCtx context.Context, c *conn, tool string, elapsed time.Duration, err error) error {
	elapsed = elapsed.Round(time.Millisecond)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("call of %s on MCP server %q stopped after %s; the server was told to cancel it: %w", tool, s.name, elapsed, ctx.Err())
	case s.m.ctx.Err() != nil:
		return fmt.Errorf("MCP server %q was shut down during the call of %s: %w", s.name, tool, ErrClosed)
	case callCtx.Err() != nil:
		return fmt.Errorf("call of %s on MCP server %q timed out after %s; the server was told to cancel it: %w", tool, s.name, s.cfg.Timeout, callCtx.Err())
	}
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return fmt.Errorf("MCP server %q refused the call of %s: %s (JSON-RPC error %d)", s.name, tool, werr.Message, werr.Code)
	}
	s.mu.Lock()
	c.broken.Store(true)
	s.mu.Unlock()
	poke(s.suspect)
	s.log.Warn().Err(err).Str("tool", tool).Msg("MCP call failed in transport")
	return fmt.Errorf("MCP server %q failed during the call of %s after %s (%v); the outcome is unknown, and the server is restarted if it stopped: %w (%w)",
		s.name, tool, elapsed, err, ErrServerFailed, toolkit.ErrOutcomeUnknown)
}

// capDescription cuts a description longer than maxDescriptionBytes (on a
// character boundary) and says so.
func capDescription(desc string) string {
	return capWith(desc, maxDescriptionBytes, " [… description cut at %s of %s …]")
}
