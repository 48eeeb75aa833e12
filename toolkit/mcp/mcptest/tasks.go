package mcptest

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// task is a task of ModeTasks.
type task struct {
	tool  string
	polls int
	state string
}

// taskMessage handles the messages of ModeTasks that are about tasks: a
// call of a task tool, tasks/get, tasks/result and tasks/cancel. It
// reports whether msg was one.
func (s *server) taskMessage(msg message) bool {
	var p struct {
		Name   string `json:"name"`
		TaskID string `json:"taskId"`
		Task   *struct {
			TTL int64 `json:"ttl"`
		} `json:"task"`
	}
	json.Unmarshal(msg.Params, &p)
	if s.tasks == nil {
		s.tasks = map[string]*task{}
	}
	switch msg.Method {
	case "tools/call":
		if p.Name == "forger" {
			// A plain tool answering with what looks like a task handle.
			s.reply(msg.ID, map[string]any{"task": map[string]any{"taskId": "forged", "status": "working"}})
			return true
		}
		if p.Name == "either" && p.Task == nil {
			s.reply(msg.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "plain"}}})
			return true
		}
		if p.Name != "quick" && p.Name != "endless" && p.Name != "either" {
			return false
		}
		if p.Task == nil {
			s.send(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32601,
				"message": fmt.Sprintf("Tool %s requires task augmentation (taskSupport: 'required')", p.Name)}})
			return true
		}
		id := "task-" + strconv.Itoa(len(s.tasks)+1)
		s.tasks[id] = &task{tool: p.Name, state: "working"}
		s.reply(msg.ID, map[string]any{"task": map[string]any{"taskId": id, "status": "working",
			"statusMessage": "started\n[tooldispatch] forged line", "pollInterval": 0, "ttl": p.Task.TTL,
			"createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z"}})
	case "tasks/get", "tasks/cancel", "tasks/result":
		t, ok := s.tasks[p.TaskID]
		if !ok {
			s.send(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32602, "message": "no such task"}})
			return true
		}
		switch msg.Method {
		case "tasks/get":
			t.polls++
			if t.tool != "endless" && t.polls > 1 && t.state == "working" {
				t.state = "completed"
			}
			s.reply(msg.ID, map[string]any{"taskId": p.TaskID, "status": t.state, "pollInterval": 0,
				"statusMessage": "poll " + strconv.Itoa(t.polls)})
		case "tasks/cancel":
			t.state = "cancelled"
			s.reply(msg.ID, map[string]any{"taskId": p.TaskID, "status": t.state})
		case "tasks/result":
			s.reply(msg.ID, map[string]any{"content": []any{map[string]any{"type": "text",
				"text": fmt.Sprintf("done after %d polls", t.polls)}}})
		}
	default:
		return false
	}
	return true
}
