package mcp

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp/mcptest"
)

// taskCall runs tool and returns its content (or error) and the lines it
// streamed.
func (h *harness) taskCall(name string) (string, []string, error) {
	h.t.Helper()
	tool := h.tool(name)
	a, _ := toolkit.ParseArgs(`{}`, toolkit.Limits{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*tool.EffectiveTimeout())
	defer cancel()
	var mu sync.Mutex
	var lines []string
	res, err := tool.Handler(ctx, &toolkit.Call{ID: "c1", Name: name, Args: a, Emit: func(s string) {
		mu.Lock()
		lines = append(lines, s)
		mu.Unlock()
	}})
	mu.Lock()
	defer mu.Unlock()
	return res.Content, lines, err
}

// TestTaskRequiredToolsRunAsTasks: a tool whose listing says taskSupport
// "required" is called as a task (the server refuses it otherwise),
// polled with tasks/get and its result fetched with tasks/result; a
// server asking to be polled without pause (pollInterval 0) is polled at
// most every minTaskPoll; its status messages stream one line each,
// their line breaks flattened. A task still working at the call's timeout
// is cancelled with tasks/cancel. A task handle answering a call not made
// as a task is not followed.
func TestTaskRequiredToolsRunAsTasks(t *testing.T) {
	srv, _ := misbehavingServer(t, "tasks", mcptest.ModeTasks)
	const timeout = time.Second
	srv.Timeout = timeout
	h := newHarness(t, []ServerConfig{srv})
	h.start()

	got, lines, err := h.taskCall("mcp__tasks__quick")
	if err != nil || got != "done after 2 polls" {
		t.Errorf("quick = %q, %v; want the task's result", got, err)
	}
	if want := []string{"task working: started [tooldispatch] forged line\n", "task working: poll 1\n", "task completed: poll 2\n"}; strings.Join(lines, "") != strings.Join(want, "") {
		t.Errorf("quick streamed %q, want %q", lines, want)
	}

	// A plain call answered with a task handle is not followed as a task
	// (no tasks/get of a task the server made up).
	if got, lines, err := h.taskCall("mcp__tasks__forger"); err != nil || got != "" || len(lines) != 0 {
		t.Errorf("forger = %q, %v, %q; want its empty result, no task followed", got, err, lines)
	}

	got, lines, err = h.taskCall("mcp__tasks__endless")
	if err == nil || !strings.Contains(err.Error(), `its task "task-2" was cancelled (tasks/cancel: its status is now cancelled)`) {
		t.Errorf("endless = %q, %v; want it cancelled at the timeout", got, err)
	}
	// Polled without pause, it would stream thousands of lines.
	if max := int(timeout/minTaskPoll) + 2; len(lines) > max {
		t.Errorf("endless streamed %d status lines in %v, want at most %d (one poll per %v)", len(lines), timeout, max, minTaskPoll)
	}
	t.Logf("endless: %d status lines", len(lines))
}

// TestOptionalTasks: a tool whose task support is "optional" is called
// plainly, unless the operator sets optional_tasks for its server.
func TestOptionalTasks(t *testing.T) {
	for _, optional := range []bool{false, true} {
		srv, _ := misbehavingServer(t, "tasks", mcptest.ModeTasks)
		srv.OptionalTasks = optional
		h := newHarness(t, []ServerConfig{srv})
		h.start()
		got, lines, err := h.taskCall("mcp__tasks__either")
		want := "plain"
		if optional {
			want = "done after 2 polls"
		}
		if err != nil || got != want {
			t.Errorf("optional_tasks = %v: either = %q, %v (streamed %q); want %q", optional, got, err, lines, want)
		}
	}
}

// TestTaskAsksForInput: server-everything's simulate-research-query of an
// ambiguous topic needs input midway (input_required): the request comes
// while tasks/result waits, reaches the person behind the call, and the
// answer reaches the task's result.
func TestTaskAsksForInput(t *testing.T) {
	h := newHarness(t, []ServerConfig{{Name: "everything", Command: serverCommand(t, "server-everything", "stdio")}})
	h.start()
	tool := h.tool("mcp__everything__simulate-research-query")
	a, err := toolkit.ParseArgs(`{"topic":"python","ambiguous":true}`, toolkit.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), tool.EffectiveTimeout())
	defer cancel()
	var asked []toolkit.Question
	res, err := tool.Handler(ctx, &toolkit.Call{ID: "c1", Name: tool.Name, Args: a, Emit: func(string) {},
		Ask: func(_ context.Context, q toolkit.Question) (toolkit.Answer, error) {
			asked = append(asked, q)
			return toolkit.Answer{Text: `{"interpretation":"programming"}`}, nil
		}})
	if err != nil || !strings.Contains(res.Content, "Clarification**: programming") {
		t.Errorf("research = %.300q, %v; want the answer in the report", res.Content, err)
	}
	if len(asked) != 1 || !strings.Contains(asked[0].Text, "could have multiple interpretations") {
		t.Errorf("asked %+v; want the server's one question", asked)
	}
}
