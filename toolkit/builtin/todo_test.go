package builtin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriteTodo(t *testing.T) {
	e := newTestEnv(t)
	tests := []struct {
		name string
		args string
		want string
		err  string
	}{
		{name: "checklist with counts",
			args: `{"todos":[{"content":"Read the config","status":"completed","id":"a"},{"content":"Fix the parser","status":"in_progress"},{"content":"Run the tests","status":"pending"}]}`,
			want: "Plan: 3 items — 1 completed, 1 in progress, 1 pending\n" +
				"[x] 1. Read the config (id a)\n" +
				"[~] 2. Fix the parser\n" +
				"[ ] 3. Run the tests\n" +
				"Next: 2. Fix the parser\n"},
		{name: "next is the first pending",
			args: `{"todos":[{"content":"A","status":"completed"},{"content":"B","status":"pending"}]}`,
			want: "Plan: 2 items — 1 completed, 0 in progress, 1 pending\n[x] 1. A\n[ ] 2. B\nNext: 2. B\n"},
		{name: "all completed",
			args: `{"todos":[{"content":"A","status":"completed"}]}`,
			want: "Plan: 1 item — 1 completed, 0 in progress, 0 pending\n[x] 1. A\nAll items are completed.\n"},
		{name: "notes on several in progress and duplicate ids",
			args: `{"todos":[{"content":"A","status":"in_progress","id":"x"},{"content":"B","status":"in_progress","id":"x"}]}`,
			want: "Plan: 2 items — 0 completed, 2 in progress, 0 pending\n[~] 1. A (id x)\n[~] 2. B (id x)\nNext: 1. A\n" +
				"Note: 2 items are in_progress; finish one before starting the next.\n" +
				"Note: id \"x\" is used by more than one item; ids should be unique.\n"},
		{name: "cleared", args: `{"todos":[]}`, want: "Plan cleared (no items).\n"},
		{name: "bad status", args: `{"todos":[{"content":"A","status":"done"}]}`, err: `todos[0].status is "done"`},
		{name: "blank content", args: `{"todos":[{"content":"  ","status":"pending"}]}`, err: "todos[0].content is empty"},
		{name: "not a list", args: `{"todos":"A"}`, err: "must be a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.call("write_todo", tt.args)
			if tt.err != "" {
				wantErr(t, err, tt.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, out); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReasoningGuide(t *testing.T) {
	e := newTestEnv(t)
	out, err := e.call("reasoning_guide", `{}`)
	wantContent(t, out, err, "How to work with these tools", "Topics: planning, tools, editing")
	for _, topic := range guideTopics {
		t.Run(topic.name, func(t *testing.T) {
			out, err := e.call("reasoning_guide", `{"topic":"`+topic.name+`"}`)
			wantContent(t, out, err, topic.text)
		})
	}
	out, err = e.call("reasoning_guide", `{"topic":"all"}`)
	wantContent(t, out, err, "find_tools", "run_tool", "write_todo", "read_files", "write_error", "restore_file", "store_secret")
	_, err = e.call("reasoning_guide", `{"topic":"cooking"}`)
	wantErr(t, err, `no topic "cooking"`, "planning")
}
