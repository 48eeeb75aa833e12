package mcp

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp/mcptest"
)

// fileTaskServer is a ModeFileTasks server keeping its tasks in file.
func fileTaskServer(t *testing.T, file string) ServerConfig {
	t.Helper()
	srv, _ := misbehavingServer(t, "jobs", mcptest.ModeFileTasks)
	srv.Env[mcptest.TaskFileEnv] = file
	return srv
}

// setTasks writes the task file with tasks, numbered on from next.
func setTasks(t *testing.T, file string, tasks map[string]*mcptest.FileTask) {
	t.Helper()
	if err := mcptest.WriteTaskFile(file, &mcptest.TaskFile{Next: 100, Tasks: tasks}); err != nil {
		t.Fatal(err)
	}
}

// readTask reads one task of the file.
func readTask(t *testing.T, file, id string) *mcptest.FileTask {
	t.Helper()
	f, err := mcptest.ReadTaskFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return f.Tasks[id]
}

// TestTaskIDNotedBeforeTheTaskIsFollowed: a call run as a task hands the
// task's id to Call.NoteTask before it streams the task's first status,
// and a server that answers tasks/get about another task does not get its
// answer taken (the call's outcome is unknown).
func TestTaskIDNotedBeforeTheTaskIsFollowed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tasks.json")
	srv := fileTaskServer(t, file)
	srv.Timeout = time.Second
	h := newHarness(t, []ServerConfig{srv})
	h.start()
	tool := h.tool("mcp__jobs__job")
	a, _ := toolkit.ParseArgs(`{"text":"done"}`, toolkit.Limits{})
	var mu sync.Mutex
	var seen []string
	c := &toolkit.Call{ID: "c1", Name: tool.Name, Args: a,
		Emit: func(s string) { mu.Lock(); seen = append(seen, "emit "+s); mu.Unlock() },
		Tasks: func(_ context.Context, id string) error {
			mu.Lock()
			seen = append(seen, "task "+id)
			mu.Unlock()
			// The server lies about the task from its first poll on.
			f, err := mcptest.ReadTaskFile(file)
			if err != nil {
				return err
			}
			f.Tasks[id].AnswerAs = "job-other"
			return mcptest.WriteTaskFile(file, f)
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := tool.Handler(ctx, c)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 || seen[0] != "task job-1" || !strings.HasPrefix(seen[1], "emit task working") {
		t.Errorf("the call did %q; want the task's id noted first, then its status streamed", seen)
	}
	if !errors.Is(err, toolkit.ErrOutcomeUnknown) || !strings.Contains(err.Error(), `another task ("job-other")`) {
		t.Errorf("a server answering about another task: %v; want an unknown outcome naming the other task", err)
	}
}

// TestResumeTask: after a restart (a new manager, a new server process on
// the same task file), ResumeTask learns the real outcome of a call's
// task: a completed task's result, a failed one's error, a cancelled
// one's cancellation, a task still working polled until it ends or
// cancelled at the bound; the outcome is unknown for a task the server no
// longer knows, an answer about another task, or a tool of no configured
// server. A huge result is cut to the server's max_result_bytes.
func TestResumeTask(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tasks.json")
	setTasks(t, file, map[string]*mcptest.FileTask{
		"job-1": {Tool: "job", Status: "completed", Text: "report: tides"},
		"job-2": {Tool: "job", Status: "failed", Text: "the job broke"},
		"job-3": {Tool: "job", Status: "cancelled", Message: "an operator stopped it"},
		"job-4": {Tool: "job", Status: "working", After: 2, Then: "completed", Text: "late but done"},
		"job-5": {Tool: "job", Status: "working"},
		"job-6": {Tool: "job", Status: "completed", Text: "someone else's", AnswerAs: "job-1"},
		"job-7": {Tool: "job", Status: "completed", Text: "0123456789", Huge: 4 << 20},
	})
	srv := fileTaskServer(t, file)
	srv.Timeout, srv.ConnectTimeout = 20*time.Second, time.Second
	srv.MaxResultBytes = 64 << 10
	h := newHarness(t, []ServerConfig{srv})
	h.start()
	resume := func(tool, id string, at time.Time) (toolkit.Result, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return h.m.ResumeTask(ctx, id, at, &toolkit.Call{ID: "c", Name: tool})
	}
	const job = "mcp__jobs__job"
	if res, err := resume(job, "job-1", time.Now()); err != nil || res.Content != "report: tides" {
		t.Errorf("completed: %q, %v; want its result", res.Content, err)
	}
	var te *ToolError
	if _, err := resume(job, "job-2", time.Now()); !errors.As(err, &te) || te.Text != "the job broke" {
		t.Errorf("failed: %v; want the task's error", err)
	}
	if _, err := resume(job, "job-3", time.Now()); !errors.Is(err, toolkit.ErrCanceled) || !strings.Contains(err.Error(), "an operator stopped it") {
		t.Errorf("cancelled: %v; want a cancellation with the server's message", err)
	}
	if res, err := resume(job, "job-4", time.Now()); err != nil || res.Content != "late but done" {
		t.Errorf("working, then completed: %q, %v; want its result", res.Content, err)
	}
	// Learned 20 s ago with a 20 s timeout: the call's deadline is past,
	// so the lookup has one connect timeout (1 s) before it cancels the
	// task.
	began := time.Now()
	_, err := resume(job, "job-5", time.Now().Add(-20*time.Second))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "was cancelled") {
		t.Errorf("working past the bound: %v; want it cancelled at the deadline", err)
	}
	if st := readTask(t, file, "job-5"); st.Status != "cancelled" {
		t.Errorf("job-5 is %s on the server, want cancelled", st.Status)
	}
	t.Logf("a task working past the bound was cancelled after %v", time.Since(began).Round(time.Millisecond))
	if _, err := resume(job, "job-404", time.Now()); !errors.Is(err, toolkit.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "no longer knows") {
		t.Errorf("unknown task: %v; want an unknown outcome saying the server no longer knows it", err)
	}
	if _, err := resume(job, "job-6", time.Now()); !errors.Is(err, toolkit.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "another task") {
		t.Errorf("an answer about another task: %v; want an unknown outcome", err)
	}
	if res, err := resume(job, "job-7", time.Now()); err != nil || len(res.Content) > 65<<10 || !strings.Contains(res.Content, "cut") {
		t.Errorf("huge result: %d bytes, %v; want it cut to about 64 KiB with a note", len(res.Content), err)
	}
	if _, err := resume("mcp__gone__job", "job-1", time.Now()); !errors.Is(err, toolkit.ErrOutcomeUnknown) {
		t.Errorf("a tool of no configured server: %v; want an unknown outcome", err)
	}
}

// TestLongTaskIDIsNotKept: a task id over maxTaskID is followed as any
// other but not handed to Call.NoteTask: the server cannot make the call's
// intent record grow with it.
func TestLongTaskIDIsNotKept(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tasks.json")
	h := newHarness(t, []ServerConfig{fileTaskServer(t, file)})
	h.start()
	tool := h.tool("mcp__jobs__job")
	id := strings.Repeat("x", maxTaskID+1)
	a, _ := toolkit.ParseArgs(`{"text":"done","id":"`+id+`"}`, toolkit.Limits{})
	var noted []string
	var once sync.Once
	c := &toolkit.Call{ID: "c1", Name: tool.Name, Args: a,
		Emit: func(string) {
			once.Do(func() { // the task ends at its next poll
				f, err := mcptest.ReadTaskFile(file)
				if err == nil {
					f.Tasks[id].Status = "completed"
					err = mcptest.WriteTaskFile(file, f)
				}
				if err != nil {
					t.Error(err)
				}
			})
		},
		Tasks: func(_ context.Context, id string) error { noted = append(noted, id); return nil }}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := tool.Handler(ctx, c)
	if err != nil || res.Content != "done" {
		t.Errorf("the call = %q, %v; want the task followed to its result", res.Content, err)
	}
	if len(noted) != 0 {
		t.Errorf("a %d-byte task id was handed to NoteTask", len(noted[0]))
	}
}
