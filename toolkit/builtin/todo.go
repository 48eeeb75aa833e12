package builtin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

const (
	todoTimeout  = 5 * time.Second
	maxTodoItems = 100
)

// Todo statuses.
const (
	todoPending    = "pending"
	todoInProgress = "in_progress"
	todoCompleted  = "completed"
)

func writeTodoTool() toolkit.Tool {
	return toolkit.Tool{
		Name: "write_todo",
		Description: "Write your plan for the current task as a checklist. Each call replaces the whole list: send every " +
			"item with its current status. Keep one item in_progress at a time and mark items completed as soon as " +
			"they are done. It changes nothing outside your plan.",
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"todos": {
					"type": "array",
					"description": "The whole plan, in order; it replaces the previous list (an empty list clears it).",
					"maxItems": 100,
					"items": {
						"type": "object",
						"description": "One step of the plan.",
						"properties": {
							"content": {
								"type": "string",
								"description": "What the step does, as a short imperative sentence.",
								"minLength": 1,
								"maxLength": 500
							},
							"status": {
								"type": "string",
								"description": "pending (not started), in_progress (being worked on now) or completed.",
								"enum": ["pending", "in_progress", "completed"]
							},
							"id": {
								"type": "string",
								"description": "Optional stable id of the step, to refer to it across updates."
							}
						},
						"required": ["content", "status"],
						"additionalProperties": false
					}
				}
			},
			"required": ["todos"],
			"additionalProperties": false
		}`),
		Concurrent: true,
		ReadOnly:   true,
		Timeout:    todoTimeout,
		Handler:    writeTodo,
	}
}

type todoItem struct {
	content, status, id string
}

func writeTodo(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	if err := ctx.Err(); err != nil {
		return toolkit.Result{}, err
	}
	raw, ok := c.Args.Value["todos"].([]any)
	if !ok {
		return toolkit.Result{}, errors.New("todos must be a list of {content, status} items")
	}
	if len(raw) > maxTodoItems {
		return toolkit.Result{}, fmt.Errorf("%d items; a plan holds at most %d", len(raw), maxTodoItems)
	}
	items := make([]todoItem, 0, len(raw))
	for i, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return toolkit.Result{}, fmt.Errorf("todos[%d] must be an object with content and status", i)
		}
		it := todoItem{}
		it.content, _ = m["content"].(string)
		it.status, _ = m["status"].(string)
		it.id, _ = m["id"].(string)
		it.content = strings.TrimSpace(it.content)
		if it.content == "" {
			return toolkit.Result{}, fmt.Errorf("todos[%d].content is empty", i)
		}
		switch it.status {
		case todoPending, todoInProgress, todoCompleted:
		default:
			return toolkit.Result{}, fmt.Errorf("todos[%d].status is %q; use pending, in_progress or completed", i, it.status)
		}
		items = append(items, it)
	}
	return toolkit.Result{Content: renderTodos(items)}, nil
}

func renderTodos(items []todoItem) string {
	if len(items) == 0 {
		return "Plan cleared (no items).\n"
	}
	counts := map[string]int{}
	var dupIDs []string
	seenIDs := map[string]bool{}
	var body strings.Builder
	for i, it := range items {
		counts[it.status]++
		mark := "[ ]"
		switch it.status {
		case todoCompleted:
			mark = "[x]"
		case todoInProgress:
			mark = "[~]"
		}
		fmt.Fprintf(&body, "%s %d. %s", mark, i+1, it.content)
		if it.id != "" {
			fmt.Fprintf(&body, " (id %s)", it.id)
			if seenIDs[it.id] && !slices.Contains(dupIDs, it.id) {
				dupIDs = append(dupIDs, it.id)
			}
			seenIDs[it.id] = true
		}
		body.WriteByte('\n')
	}

	var b strings.Builder
	fmt.Fprintf(&b, "Plan: %s — %d completed, %d in progress, %d pending\n",
		plural(len(items), "item"), counts[todoCompleted], counts[todoInProgress], counts[todoPending])
	b.WriteString(body.String())
	next := slices.IndexFunc(items, func(it todoItem) bool { return it.status == todoInProgress })
	if next < 0 {
		next = slices.IndexFunc(items, func(it todoItem) bool { return it.status == todoPending })
	}
	if next < 0 {
		b.WriteString("All items are completed.\n")
	} else {
		fmt.Fprintf(&b, "Next: %d. %s\n", next+1, items[next].content)
	}
	if n := counts[todoInProgress]; n > 1 {
		fmt.Fprintf(&b, "Note: %d items are in_progress; finish one before starting the next.\n", n)
	}
	for _, id := range dupIDs {
		fmt.Fprintf(&b, "Note: id %q is used by more than one item; ids should be unique.\n", id)
	}
	return b.String()
}
