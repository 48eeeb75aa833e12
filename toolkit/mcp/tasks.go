package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Tasks: a tool whose listing says execution.taskSupport "required" is
// called as a task (over a tapped connection: stdio or in process). The
// server answers the call with a task handle at once; the call then polls
// tasks/get, at the server's pollInterval bounded by
// [minTaskPoll, maxTaskPoll], streaming each new status as a
// tool_call_text line, until the task is completed or failed (its result
// is then fetched with tasks/result), cancelled, or needs input
// (tasks/result is then awaited: the server's requests for input reach
// the person behind the call meanwhile, elicit.go). A task still running
// when the call's timeout ends is cancelled with tasks/cancel.
const (
	// taskRequired is the taskSupport of a tool that must run as a task,
	// taskOptional of one that may (ServerConfig.OptionalTasks).
	taskRequired = "required"
	taskOptional = "optional"
	// minTaskPoll and maxTaskPoll bound the server's pollInterval;
	// defaultTaskPoll is used when it gives none.
	minTaskPoll     = 250 * time.Millisecond
	maxTaskPoll     = 5 * time.Second
	defaultTaskPoll = time.Second
	// taskCancelTimeout bounds the tasks/cancel of a task whose call
	// timed out.
	taskCancelTimeout = 5 * time.Second
	// maxTaskStatus bounds a task's status message in a tool_call_text line.
	maxTaskStatus = 1 << 10
	// maxTaskID bounds a task id kept in the call's intent record
	// (Call.NoteTask); a longer one is followed but not kept.
	maxTaskID = 1 << 10

	methodTaskGet    = "tasks/get"
	methodTaskResult = "tasks/result"
	methodTaskCancel = "tasks/cancel"
)

// Task statuses.
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

// errTaskHandle: a call run as a task was answered with no task handle
// the dispatcher can follow.
var errTaskHandle = errors.New("the server's task handle has no task id")

// taskState is what tasks/get (and a task handle) tells of a task.
type taskState struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	PollInterval  *int64 `json:"pollInterval"` // milliseconds
}

// poll is the wait before the next tasks/get.
func (t *taskState) poll() time.Duration {
	if t.PollInterval == nil {
		return defaultTaskPoll
	}
	return min(max(time.Duration(*t.PollInterval)*time.Millisecond, minTaskPoll), maxTaskPoll)
}

// terminal reports whether the task has ended.
func (t *taskState) terminal() bool {
	switch t.Status {
	case taskCompleted, taskFailed, taskCancelled:
		return true
	}
	return false
}

// errOtherTask: a server answered tasks/get about another task than the
// one asked.
var errOtherTask = errors.New("the server answered about another task")

// readTaskState reads what tasks/get answered about task id: an answer
// naming another task is refused (a server cannot hand a call another
// task's outcome), one naming none is taken as about id.
func readTaskState(raw json.RawMessage, id string) (*taskState, error) {
	var st taskState
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if st.TaskID != "" && st.TaskID != id {
		return nil, fmt.Errorf("%w (%q), so the outcome of the task asked about is unknown: %w", errOtherTask, oneLine(st.TaskID, 128), toolkit.ErrOutcomeUnknown)
	}
	st.TaskID = id
	return &st, nil
}

// asTask reports whether a tool of the given taskSupport is called as a
// task.
func (s *server) asTask(support string) bool {
	return support == taskRequired || (support == taskOptional && s.cfg.OptionalTasks)
}

// taskOf reads the task handle the tap put under its key in res's _meta;
// nil when res is a plain result.
func taskOf(res *mcp.CallToolResult, key string) (*taskState, error) {
	h, ok := res.Meta[key]
	if !ok {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	var st taskState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("reading the server's task handle: %w", err)
	}
	if st.TaskID == "" {
		// The 2026-07-28 extension's result may carry it as "task".
		var wrapped struct {
			Task taskState `json:"task"`
		}
		if json.Unmarshal(b, &wrapped) == nil {
			st = wrapped.Task
		}
	}
	if st.TaskID == "" {
		return nil, errTaskHandle
	}
	return &st, nil
}

// awaitTask follows the task st of the call c of tool on the tapped
// connection t until it ends, and returns its result. ctx is the call's:
// when it ends first, the task is cancelled.
func (s *server) awaitTask(ctx context.Context, t *tap, tool string, c *toolkit.Call, st *taskState) (*mcp.CallToolResult, error) {
	s.log.Debug().Str("tool", tool).Str("task", oneLine(st.TaskID, 128)).Msg("MCP call runs as a task")
	shown := ""
	show := func(st *taskState) {
		line := st.Status
		if m := oneLine(c.Redact(st.StatusMessage), maxTaskStatus); m != "" {
			line += ": " + m
		}
		if line != shown && c.Emit != nil {
			shown = line
			c.Emit("task " + line + "\n")
		}
	}
	show(st)
	timer := time.NewTimer(st.poll())
	defer timer.Stop()
	for !st.terminal() && st.Status != taskInputRequired {
		select {
		case <-ctx.Done():
			return nil, s.cancelTask(ctx, t, tool, st.TaskID)
		case <-timer.C:
		}
		raw, err := t.request(ctx, methodTaskGet, map[string]string{"taskId": st.TaskID})
		if ctx.Err() != nil {
			return nil, s.cancelTask(ctx, t, tool, st.TaskID)
		}
		if err != nil {
			return nil, fmt.Errorf("MCP server %q: %s of task %q of %s: %w", s.name, methodTaskGet, oneLine(st.TaskID, 128), tool, err)
		}
		next, err := readTaskState(raw, st.TaskID)
		if err != nil {
			return nil, fmt.Errorf("MCP server %q: %s of task %q of %s: %w", s.name, methodTaskGet, oneLine(st.TaskID, 128), tool, err)
		}
		st = next
		show(st)
		timer.Reset(st.poll())
	}
	if st.Status == taskCancelled {
		return nil, fmt.Errorf("MCP server %q cancelled task %q of %s: %s (%w)", s.name, oneLine(st.TaskID, 128), tool,
			oneLine(c.Redact(st.StatusMessage), maxTaskStatus), toolkit.ErrCanceled)
	}
	// Completed or failed: the result is ready. Needing input: the
	// server's requests for it come while tasks/result waits.
	raw, err := t.request(ctx, methodTaskResult, map[string]string{"taskId": st.TaskID})
	if ctx.Err() != nil {
		return nil, s.cancelTask(ctx, t, tool, st.TaskID)
	}
	if err != nil {
		return nil, fmt.Errorf("MCP server %q: %s of task %q of %s: %w", s.name, methodTaskResult, oneLine(st.TaskID, 128), tool, err)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("MCP server %q: reading %s of %s: %w", s.name, methodTaskResult, tool, err)
	}
	if st.Status == taskFailed {
		res.IsError = true
	}
	return &res, nil
}

// cancelTask asks the server to cancel the task of a call whose context
// ended, and returns the call's error, saying what the server answered.
func (s *server) cancelTask(ctx context.Context, t *tap, tool, taskID string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), taskCancelTimeout)
	defer cancel()
	stop := context.AfterFunc(s.m.ctx, cancel)
	defer stop()
	outcome := "the server did not answer"
	raw, err := t.request(cctx, methodTaskCancel, map[string]string{"taskId": taskID})
	var st taskState
	switch {
	case err != nil:
		outcome = "the server answered: " + oneLine(err.Error(), maxTaskStatus)
	case json.Unmarshal(raw, &st) == nil && st.Status != "":
		outcome = "its status is now " + oneLine(st.Status, 64)
	}
	s.log.Info().Str("tool", tool).Str("task", oneLine(taskID, 128)).Str("outcome", outcome).Msg("MCP task cancelled")
	why := "timed out after " + s.cfg.Timeout.String()
	if errors.Is(ctx.Err(), context.Canceled) {
		why = "was stopped"
	}
	return fmt.Errorf("call of %s on MCP server %q %s; its task %q was cancelled (tasks/cancel: %s): %w",
		tool, s.name, why, oneLine(taskID, 128), outcome, ctx.Err())
}
