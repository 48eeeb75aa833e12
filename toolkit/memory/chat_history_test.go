package memory

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// commitTurns commits turns to session s1 through the store's own commit
// path, numbering them from 1.
func commitTurns(t *testing.T, store cachestore.Store, session string, turns ...*messages.TurnRecord) {
	t.Helper()
	for i, rec := range turns {
		rec.Turn = int64(i + 1)
		rec.Run = "r1"
		if err := store.CommitTurn(context.Background(), &cachestore.TurnCommit{Session: session, Record: rec}); err != nil {
			t.Fatalf("committing turn %d: %v", rec.Turn, err)
		}
	}
}

func call(id, name, args string) *messages.ToolCall {
	return &messages.ToolCall{Id: id, Type: "function", Function: &messages.FunctionCall{Name: name, Arguments: args}}
}

func result(id, name, status, content string) *messages.ToolMessage {
	return &messages.ToolMessage{Role: "tool", ToolCallId: id, Name: name, Status: status, Content: content}
}

// historyFixture commits three turns: a read of config.yaml that failed, an
// edit, and a chat_history call whose answer must not be searched.
func historyFixture(t *testing.T) *Memory {
	t.Helper()
	store := openBadger(t)
	commitTurns(t, store, "s1",
		&messages.TurnRecord{
			Assistant: &messages.AssistantMessage{Role: "assistant", Content: "Let me read the config first.", ToolCalls: []*messages.ToolCall{
				call("c1", "read_files", `{"paths":["config.yaml"]}`),
				call("c2", "find_files", `{"pattern":"*.go"}`),
			}},
			ToolMessages: []*messages.ToolMessage{
				result("c1", "read_files", "error", "config.yaml permission denied"),
				result("c2", "find_files", "ok", "main.go\nserver.go"),
			},
		},
		&messages.TurnRecord{
			Assistant: &messages.AssistantMessage{Role: "assistant", ToolCalls: []*messages.ToolCall{
				call("c3", "run_command", `{"argv":["chmod","644","config.yaml"]}`),
				call("c4", "read_files", `{"paths":["config.yaml"]}`),
			}},
			ToolMessages: []*messages.ToolMessage{
				result("c3", "run_command", "ok", ""),
				result("c4", "read_files", "ok", "port: 8080\nhost: example.org"),
			},
		},
		&messages.TurnRecord{
			Assistant: &messages.AssistantMessage{Role: "assistant", Content: "The port is 8080.", ToolCalls: []*messages.ToolCall{
				call("c5", "chat_history", `{"query":"config.yaml"}`),
			}},
			ToolMessages: []*messages.ToolMessage{
				result("c5", "chat_history", "ok", "[turn 1] result read_files #c1 (error): config.yaml permission denied"),
			},
		},
	)
	// Another session's turns stay out of s1's history.
	commitTurns(t, store, "s2", &messages.TurnRecord{
		Assistant: &messages.AssistantMessage{Role: "assistant", Content: "config.yaml in another session"},
	})
	return New(store, t.TempDir())
}

var entryLine = regexp.MustCompile(`(?m)^\[turn (\d+)\] ([^:(]+?)(?: \([a-z_]+\))?:`)

// entries returns "turn label" of each entry an answer shows, e.g.
// "1 result read_files #c1".
func entries(out string) []string {
	var got []string
	for _, m := range entryLine.FindAllStringSubmatch(out, -1) {
		got = append(got, m[1]+" "+m[2])
	}
	return got
}

func TestChatHistory(t *testing.T) {
	m := historyFixture(t)
	tests := []struct {
		name string
		args string
		want []string
		has  []string // substrings of the answer
	}{
		{
			name: "keyword over calls and results, newest first",
			args: `{"query":"config.yaml"}`,
			want: []string{"2 call run_command #c3", "2 call read_files #c4", "1 call read_files #c1", "1 result read_files #c1"},
		},
		{
			name: "every word must match when some entry holds them all",
			args: `{"query":"CONFIG.yaml denied"}`,
			want: []string{"1 result read_files #c1"},
			has:  []string{"(error): config.yaml permission denied"},
		},
		{
			name: "falls back to entries holding some words",
			args: `{"query":"8080 kubernetes"}`,
			want: []string{"3 assistant", "2 result read_files #c4"},
			has:  []string{"No entry in 3 committed turns holds every word"},
		},
		{
			name: "role assistant",
			args: `{"query":"config","role":"assistant"}`,
			want: []string{"2 call run_command #c3", "2 call read_files #c4", "1 assistant", "1 call read_files #c1"},
		},
		{
			name: "role tool",
			args: `{"query":"config","role":"tool"}`,
			want: []string{"1 result read_files #c1"},
		},
		{
			name: "one turn",
			args: `{"turn":1}`,
			want: []string{"1 assistant", "1 call read_files #c1", "1 call find_files #c2", "1 result read_files #c1", "1 result find_files #c2"},
			has:  []string{`call read_files #c1: {"paths":["config.yaml"]}`, "main.go server.go"},
		},
		{
			name: "latest entries without a query, limited",
			args: `{"limit":3}`,
			want: []string{"3 assistant", "2 call run_command #c3", "2 call read_files #c4"},
			has:  []string{"… 7 more not shown"},
		},
		{
			name: "tool name and status",
			args: `{"query":"run_command ok"}`,
			want: []string{"2 result run_command #c3"},
			has:  []string{"(ok): (no output)"},
		},
		{
			name: "nothing matches",
			args: `{"query":"kubernetes"}`,
			has:  []string{`Nothing in 3 committed turns matches "kubernetes"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := mustRun(t, m, "chat_history", tt.args)
			if diff := cmp.Diff(tt.want, entries(out)); diff != "" {
				t.Errorf("entries (-want +got):\n%s\noutput:\n%s", diff, out)
			}
			for _, h := range tt.has {
				if !strings.Contains(out, h) {
					t.Errorf("answer lacks %q:\n%s", h, out)
				}
			}
			if strings.Contains(out, "chat_history") || strings.Contains(out, "another session") {
				t.Errorf("answer shows chat_history's own entries or another session:\n%s", out)
			}
		})
	}
}

func TestChatHistoryEmptyAndMissingTurn(t *testing.T) {
	m := historyFixture(t)
	if out, err := runIn(t, m, "nobody", "chat_history", `{"query":"x"}`); err != nil || !strings.Contains(out, "No committed turns") {
		t.Errorf("empty session: %q, %v", out, err)
	}
	if _, err := run(t, m, "chat_history", `{"turn":9}`); err == nil || !strings.Contains(err.Error(), "from 1 to 3") {
		t.Errorf("turn 9 of 3: %v", err)
	}
}

func TestChatHistoryCapsOutput(t *testing.T) {
	store := openBadger(t)
	var turns []*messages.TurnRecord
	for i := range 60 {
		id := fmt.Sprintf("c%d", i)
		turns = append(turns, &messages.TurnRecord{
			Assistant:    &messages.AssistantMessage{Role: "assistant", ToolCalls: []*messages.ToolCall{call(id, "fetch_page", `{"url":"https://example.org"}`)}},
			ToolMessages: []*messages.ToolMessage{result(id, "fetch_page", "ok", strings.Repeat("needle in a haystack ", 2000))},
		})
	}
	commitTurns(t, store, "s1", turns...)
	m := New(store, t.TempDir())
	out := mustRun(t, m, "chat_history", `{"query":"needle","limit":50,"role":"tool"}`)
	if len(out) > maxChatOutput+200 {
		t.Errorf("answer is %d bytes, cap is %d", len(out), maxChatOutput)
	}
	if got := entries(out); len(got) == 0 || got[0] != "60 result fetch_page #c59" {
		t.Errorf("newest first: %v", got)
	}
	if !strings.Contains(out, "more not shown") {
		t.Errorf("answer does not say entries were left out:\n%s", out[len(out)-200:])
	}
}
