package memory

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Bounds of chat_history.
const (
	chatHistoryTimeout = 15 * time.Second
	chatHistoryName    = "chat_history"

	defaultChatLimit = 10
	maxChatLimit     = 50
	maxQueryWords    = 20
	// maxChatOutput caps the whole answer.
	maxChatOutput = 16 << 10
	// Excerpt sizes: around the first match in a search, whole entries
	// (up to turnEntryBytes) when reading one turn.
	excerptBefore  = 150
	excerptAfter   = 250
	listEntryBytes = 400
	turnEntryBytes = 2000
)

// Roles chat_history filters on.
const (
	roleAssistant = "assistant"
	roleTool      = "tool"
	roleAny       = "any"
)

func (m *Memory) chatHistoryTool() toolkit.Tool {
	return toolkit.Tool{
		Name: chatHistoryName,
		Description: "Search this session's earlier turns: your messages, the tool calls you made (name and " +
			"arguments) and their results, newest first, each marked with its turn number. Give keywords to search, " +
			"turn to read one turn, role to keep only your side (assistant) or only results (tool). Use it to recall " +
			"what an earlier call returned instead of running it again.",
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"query": {
					"type": "string",
					"description": "Words to look for (case-insensitive; e.g. \"config.yaml timeout\"). Entries holding every word come first; without a query, the latest entries are listed.",
					"maxLength": 1000
				},
				"role": {
					"type": "string",
					"description": "assistant: your messages and tool calls; tool: tool results; any (default): both.",
					"enum": ["assistant", "tool", "any"]
				},
				"limit": {
					"type": "integer",
					"description": "Most entries to return (default 10).",
					"minimum": 1,
					"maximum": 50
				},
				"turn": {
					"type": "integer",
					"description": "Only this turn (turn numbers start at 1 and appear in search results).",
					"minimum": 1
				}
			},
			"additionalProperties": false
		}`),
		Concurrent: true,
		ReadOnly:   true,
		Timeout:    chatHistoryTimeout,
		Handler:    m.chatHistory,
		// The history grows with every turn: every search runs.
		NoDedup: true,
	}
}

// chatEntry is one searchable piece of a committed turn.
type chatEntry struct {
	turn  int64
	role  string // roleAssistant or roleTool
	label string // "assistant", "call read_files #c1", "result read_files #c1 (ok)"
	text  string
	// search is label and text lowercased: a query matches tool names and
	// statuses too.
	search string
}

// chatEntries flattens a turn into entries, in turn order. chat_history's
// own calls and results are left out, so a search does not find its
// earlier answers.
func chatEntries(rec *messages.TurnRecord) []chatEntry {
	var out []chatEntry
	add := func(role, label, text string) {
		out = append(out, chatEntry{turn: rec.GetTurn(), role: role, label: label, text: text, search: strings.ToLower(label + " " + text)})
	}
	if a := rec.GetAssistant(); a != nil {
		if strings.TrimSpace(a.GetContent()) != "" {
			add(roleAssistant, "assistant", a.GetContent())
		}
		for _, tc := range a.GetToolCalls() {
			name := tc.GetFunction().GetName()
			if name == chatHistoryName {
				continue
			}
			args := tc.GetFunction().GetArguments()
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			add(roleAssistant, fmt.Sprintf("call %s #%s", name, tc.GetId()), args)
		}
	}
	for _, tm := range rec.GetToolMessages() {
		if tm.GetName() == chatHistoryName {
			continue
		}
		text := tm.GetContent()
		if strings.TrimSpace(text) == "" {
			text = "(no output)"
		}
		add(roleTool, fmt.Sprintf("result %s #%s (%s)", tm.GetName(), tm.GetToolCallId(), tm.GetStatus()), text)
	}
	return out
}

func (m *Memory) chatHistory(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	turns, err := m.store.Turns(ctx, c.Session)
	if err != nil {
		return toolkit.Result{}, fmt.Errorf("reading the session's history: %w", err)
	}
	if len(turns) == 0 {
		return toolkit.Result{Content: "No committed turns in this session yet.\n"}, nil
	}
	role := c.Args.String("role")
	if role == "" {
		role = roleAny
	}
	limit := int(min(max(c.Args.Int("limit", defaultChatLimit), 1), maxChatLimit))
	turn := c.Args.Int("turn", 0)
	words := queryWords(c.Args.String("query"))

	// Newest turn first; entries of one turn in their order.
	var pool []chatEntry
	for i := len(turns) - 1; i >= 0; i-- {
		if turn > 0 && turns[i].GetTurn() != turn {
			continue
		}
		for _, e := range chatEntries(turns[i]) {
			if role == roleAny || e.role == role {
				pool = append(pool, e)
			}
		}
	}
	if turn > 0 && len(pool) == 0 {
		last := turns[len(turns)-1].GetTurn()
		if turn > last {
			return toolkit.Result{}, fmt.Errorf("turn %d is not committed; this session's turns go from 1 to %d", turn, last)
		}
	}

	hits, partial := pool, false
	if len(words) > 0 {
		hits, partial = match(pool, words)
	}

	var b strings.Builder
	scope, order := fmt.Sprintf("%d committed turns", len(turns)), ", newest first"
	if turn > 0 {
		scope, order = fmt.Sprintf("turn %d", turn), ""
	}
	switch {
	case len(hits) == 0 && len(words) > 0:
		fmt.Fprintf(&b, "Nothing in %s matches %q.\n", scope, strings.Join(words, " "))
		return toolkit.Result{Content: b.String()}, nil
	case len(hits) == 0:
		fmt.Fprintf(&b, "Nothing to show in %s for role %s.\n", scope, role)
		return toolkit.Result{Content: b.String()}, nil
	case len(words) > 0 && partial:
		fmt.Fprintf(&b, "No entry in %s holds every word of %q; %d entries hold some of them%s:\n", scope, strings.Join(words, " "), len(hits), order)
	case len(words) > 0:
		fmt.Fprintf(&b, "%d entries in %s match %q%s:\n", len(hits), scope, strings.Join(words, " "), order)
	default:
		fmt.Fprintf(&b, "%d entries in %s%s:\n", len(hits), scope, order)
	}

	size := turnEntryBytes
	if turn == 0 {
		size = listEntryBytes
	}
	shown := 0
	for _, e := range hits {
		if shown == limit {
			break
		}
		line := fmt.Sprintf("[turn %d] %s: %s\n", e.turn, e.label, excerpt(e, words, size))
		if b.Len()+len(line) > maxChatOutput {
			break
		}
		b.WriteString(line)
		shown++
	}
	if rest := len(hits) - shown; rest > 0 {
		fmt.Fprintf(&b, "… %d more not shown; narrow the search with more words, role or turn.\n", rest)
	}
	return toolkit.Result{Content: b.String()}, nil
}

// queryWords splits a query into lowercase words (punctuation kept, so
// "config.yaml" is one word), without repeats.
func queryWords(q string) []string {
	var out []string
	for _, w := range strings.Fields(strings.ToLower(q)) {
		w = strings.Trim(w, `"'`)
		if w == "" || len(out) == maxQueryWords {
			continue
		}
		dup := false
		for _, o := range out {
			dup = dup || o == w
		}
		if !dup {
			out = append(out, w)
		}
	}
	return out
}

// match keeps the entries that hold every word; when none does, the entries
// that hold at least one, most words first (partial is then true). Order is
// otherwise kept.
func match(pool []chatEntry, words []string) (hits []chatEntry, partial bool) {
	counts := make([]int, len(pool))
	for i, e := range pool {
		for _, w := range words {
			if strings.Contains(e.search, w) {
				counts[i]++
			}
		}
		if counts[i] == len(words) {
			hits = append(hits, e)
		}
	}
	if len(hits) > 0 {
		return hits, false
	}
	for n := len(words) - 1; n >= 1; n-- {
		for i, e := range pool {
			if counts[i] == n {
				hits = append(hits, e)
			}
		}
	}
	return hits, true
}

// excerpt returns a one-line piece of the entry's text: around the first
// word found, or its start.
func excerpt(e chatEntry, words []string, size int) string {
	if len(e.text) <= size {
		return oneLine(e.text, size)
	}
	start := 0
	if lower := strings.ToLower(e.text); len(lower) == len(e.text) {
		for _, w := range words {
			if i := strings.Index(lower, w); i >= 0 {
				start = max(0, i-excerptBefore)
				break
			}
		}
	}
	if start == 0 {
		return oneLine(e.text, size)
	}
	for start < len(e.text) && !isRuneStart(e.text[start]) {
		start++
	}
	return "…" + oneLine(e.text[start:], min(size, excerptBefore+excerptAfter))
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
