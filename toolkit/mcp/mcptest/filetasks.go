package mcptest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ModeFileTasks: a task server that keeps its tasks in the file
// TaskFileEnv names, so that they outlive the process: a server started
// again on the same file knows the tasks of the one before, and a test
// decides a task's fate by editing the file (ReadTaskFile,
// WriteTaskFile) between the server's runs. It lists echo and "job"
// (execution.taskSupport "required"). A call of job as a task makes a
// task that is working until the file says otherwise, numbered job-N
// unless job's argument "id" names it; job's arguments "text" (the result
// a completed task gives) and "gate" (a FIFO: the server writes the task
// to the file, then reads the FIFO to its end before it answers the call)
// are kept with it. tasks/get counts the
// task's polls, applies its Then after After polls and answers its
// status (naming AnswerAs instead of the task's id when set); tasks/result
// answers a completed task's Text (repeated to Huge bytes when set) or a
// failed one's as an error; tasks/cancel cancels it. A task not in the
// file is answered with the error -32602 "no such task".
const ModeFileTasks = "file-tasks"

// TaskFileEnv names ModeFileTasks' file.
const TaskFileEnv = "TOOLDISPATCH_TEST_MCP_TASK_FILE"

// lockFile is the file whose lock a ModeFileTasks server holds for its
// whole life (and EditTaskFile while it edits): a server started again
// waits for the one before to be gone, and an edit for every server.
func lockFile(path string) string { return path + ".lock" }

// lockTasks takes the lock of the task file path, waiting for whoever
// holds it; closing the file releases it.
func lockTasks(path string) (*os.File, error) {
	f, err := os.OpenFile(lockFile(path), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// EditTaskFile changes ModeFileTasks' file with edit once no server uses
// it (a server that outlived the process that ran it has gone).
func EditTaskFile(path string, edit func(*TaskFile)) error {
	l, err := lockTasks(path)
	if err != nil {
		return err
	}
	defer l.Close()
	f, err := ReadTaskFile(path)
	if err != nil {
		return err
	}
	edit(f)
	return WriteTaskFile(path, f)
}

// TaskFile is what ModeFileTasks keeps.
type TaskFile struct {
	// Next numbers the next task: job-<Next>.
	Next  int                  `json:"next"`
	Tasks map[string]*FileTask `json:"tasks"`
}

// FileTask is one task of ModeFileTasks.
type FileTask struct {
	Tool string `json:"tool"`
	// Status is working, completed, failed or cancelled.
	Status string `json:"status"`
	// Text is the result of a completed or failed task; Message the
	// status message.
	Text    string `json:"text,omitempty"`
	Message string `json:"message,omitempty"`
	// Polls counts the tasks/get the task was asked.
	Polls int `json:"polls"`
	// Then, when set, becomes the status at the After-th poll.
	After int    `json:"after,omitempty"`
	Then  string `json:"then,omitempty"`
	// AnswerAs, when set, is the task id tasks/get answers with.
	AnswerAs string `json:"answer_as,omitempty"`
	// Huge, when set, is the length tasks/result repeats Text to.
	Huge int `json:"huge,omitempty"`
}

// ReadTaskFile reads ModeFileTasks' file; a missing one is empty.
func ReadTaskFile(path string) (*TaskFile, error) {
	f := &TaskFile{Next: 1, Tasks: map[string]*FileTask{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Tasks == nil {
		f.Tasks = map[string]*FileTask{}
	}
	return f, nil
}

// WriteTaskFile replaces ModeFileTasks' file whole (a rename: a reader
// sees the old file or the new one).
func WriteTaskFile(path string, f *TaskFile) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tasks-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// jobTool is ModeFileTasks' task tool.
func jobTool() map[string]any {
	t := tool("job", "Runs a job as a task.", map[string]any{"type": "object", "properties": map[string]any{
		"text": map[string]any{"type": "string"}, "gate": map[string]any{"type": "string"}, "id": map[string]any{"type": "string"}}})
	t["execution"] = map[string]any{"taskSupport": "required"}
	return t
}

// fileTaskMessage handles the messages of ModeFileTasks that are about
// tasks, and reports whether msg was one.
func (s *server) fileTaskMessage(msg message) bool {
	var p struct {
		Name      string `json:"name"`
		TaskID    string `json:"taskId"`
		Arguments struct {
			Text string `json:"text"`
			Gate string `json:"gate"`
			ID   string `json:"id"`
		} `json:"arguments"`
		Task *struct {
			TTL int64 `json:"ttl"`
		} `json:"task"`
	}
	json.Unmarshal(msg.Params, &p)
	switch {
	case msg.Method == "tools/call" && p.Name == "job":
	case strings.HasPrefix(msg.Method, "tasks/"):
	default:
		return false
	}
	path := os.Getenv(TaskFileEnv)
	f, err := ReadTaskFile(path)
	if err != nil {
		s.send(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32603, "message": err.Error()}})
		return true
	}
	if msg.Method == "tools/call" {
		if p.Task == nil {
			s.send(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32601,
				"message": "Tool job requires task augmentation (taskSupport: 'required')"}})
			return true
		}
		id := "job-" + strconv.Itoa(f.Next)
		f.Next++
		if p.Arguments.ID != "" {
			id = p.Arguments.ID
		}
		f.Tasks[id] = &FileTask{Tool: p.Name, Status: "working", Text: p.Arguments.Text, Message: "started"}
		s.save(path, f)
		if p.Arguments.Gate != "" {
			// Opening a FIFO to read waits for its writer: the test knows
			// the task is in the file once its open returns.
			if g, err := os.Open(p.Arguments.Gate); err == nil {
				io.Copy(io.Discard, g)
				g.Close()
			}
		}
		s.reply(msg.ID, map[string]any{"task": taskInfo(id, f.Tasks[id])})
		return true
	}
	t, ok := f.Tasks[p.TaskID]
	if !ok {
		s.send(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32602, "message": "no such task"}})
		return true
	}
	switch msg.Method {
	case "tasks/get":
		t.Polls++
		if t.Then != "" && t.Polls >= t.After {
			t.Status, t.Then = t.Then, ""
		}
		s.save(path, f)
		info := taskInfo(p.TaskID, t)
		if t.AnswerAs != "" {
			info["taskId"] = t.AnswerAs
		}
		s.reply(msg.ID, info)
	case "tasks/cancel":
		t.Status, t.Message = "cancelled", "cancelled by the client"
		s.save(path, f)
		s.reply(msg.ID, taskInfo(p.TaskID, t))
	case "tasks/result":
		s.fileTaskResult(msg, t)
	default:
		s.send(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
	}
	return true
}

// fileTaskResult answers tasks/result of t.
func (s *server) fileTaskResult(msg message, t *FileTask) {
	text := t.Text
	if t.Huge > 0 && text != "" {
		text = strings.Repeat(text, t.Huge/len(text)+1)[:t.Huge]
	}
	switch t.Status {
	case "completed":
		s.reply(msg.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
	case "failed":
		s.reply(msg.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": true})
	default:
		s.send(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32602,
			"message": "task " + t.Status + ": no result"}})
	}
}

// save writes f, or says on stderr why it could not.
func (s *server) save(path string, f *TaskFile) {
	if err := WriteTaskFile(path, f); err != nil {
		fmt.Fprintln(os.Stderr, "file-tasks:", err)
	}
}

// taskInfo is a task as tasks/get and a task handle describe it.
func taskInfo(id string, t *FileTask) map[string]any {
	return map[string]any{"taskId": id, "status": t.Status, "statusMessage": t.Message, "pollInterval": 0,
		"ttl": 600000, "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z"}
}
