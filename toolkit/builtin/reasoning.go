package builtin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

const reasoningTimeout = 5 * time.Second

// guideTopics are the sections of reasoning_guide, in the order "all"
// prints them.
var guideTopics = []struct{ name, text string }{
	{"overview", `How to work with these tools
- Understand the request, then plan (write_todo for anything over three steps).
- Gather facts before acting: read the files, list what exists, check versions.
- Act in small steps, verify each one, and keep the plan current.
- Report what you did and how you checked it; say plainly what is still open.
Topics: planning, tools, editing, debugging, commands, errors (reasoning_guide {"topic": "…"}).`},

	{"planning", `Planning
- Restate the goal in one sentence and name what "done" looks like (a test passes, a file contains X).
- Break the work into steps with write_todo. Send the whole list every time; keep exactly one item
  in_progress; mark an item completed as soon as it is done, not in a batch at the end.
- Put information gathering first: most wrong answers come from acting on a guess.
- Prefer the smallest change that meets the goal; note follow-ups instead of doing them unasked.
- When a step fails twice the same way, stop and re-plan: the assumption behind the step is wrong.
- Before the final answer, walk the list: every item completed or explicitly left open with a reason.`},

	{"tools", `Using tools
- Only a few tools are in your tools array. The others are listed by name in the context: fetch their
  schemas with find_tools (mode "search" with keywords, or query "select:name1,name2" for exact names),
  then call them through run_tool {"name": …, "arguments": {…}}.
- A tool called before its schema was fetched returns the schema instead of running: call it again.
- Calls in one turn that do not depend on each other run together: batch independent reads
  (read_files with several paths, find_files, file_history, calculate) into one turn.
- Calls that change things (edit_file, remove_file, restore_file, run_command) run one at a time in the
  order you give them, after the calls before them: put a read that must see an edit in the next turn.
- Repeating an identical successful call returns the earlier result; after an edit, reads of that file
  run again. Do not repeat a call hoping for a different answer: change the arguments.
- Some calls need approval; a skipped call was not run. Ask the user (ask_user) when a choice is theirs.
- Use calculate for arithmetic instead of doing it in your head.`},

	{"editing", `Editing files
- Read before you edit: read_files shows line numbers; copy old_string from it exactly, whitespace and
  indentation included, without the line-number prefix.
- Prefer a patch (old_string/new_string) over rewriting a whole file; include enough surrounding lines
  to make old_string unique, or set replace_all when every occurrence must change.
- One logical change per edit; several edits in one turn run in order.
- Every change keeps the previous content as a version: file_history lists them, restore_file undoes the
  last change (or goes back to a given version). remove_file is undoable the same way.
- After editing, verify: re-read the changed region, run the formatter, build and tests (run_command).
- Paths are relative to the workspace; nothing outside it can be read or written.`},

	{"debugging", `Debugging
- Reproduce first: run the failing command and read the whole error, especially the first one.
- Form one hypothesis at a time and test it with the cheapest check (read the code, add a focused
  test, print a value) before changing anything.
- Read the code on the path of the failure, not just the line in the message: callers, config, data.
- Change one thing, re-run, compare. Revert changes that did not help (restore_file).
- When it works, make sure you know why; add or keep a test that would have caught it.
- If you fixed an error that a tool reported, record it with write_error (outcome "resolved") so the
  fix is found next time; check error_history before digging into a familiar-looking failure.`},

	{"commands", `Running commands
- run_command takes argv: ["go", "test", "./..."], not a command line. Shell syntax (pipes, &&,
  redirections) needs shell mode, which the host may disable.
- Commands run in the workspace (or cwd inside it) with a minimal environment: PATH, HOME, LANG. Pass
  what a command needs as arguments or files; secrets are not in the environment.
- Set timeout_ms for anything that might hang; interactive programs get empty stdin (use stdin to feed
  input). Background processes are stopped when the command ends.
- A non-zero exit is an error result that carries the output: read it before retrying.
- Long output keeps its head and tail; narrow it (a single test with -run, a path) rather than scrolling.
- Every run_command call counts as a change and may need approval: look around with read_files and
  find_files, and keep commands for building, testing and tools that have no other way in.`},

	{"errors", `When a call fails
- Read the message: invalid_args names the field and what it wants; unknown_tool suggests close names;
  deferred means fetch the schema with find_tools and call through run_tool.
- A missing or rejected credential (401/403, missing key) is fixed with store_secret, never by putting the
  secret in arguments.
- timeout: narrow the work or raise timeout_ms; canceled: the turn was stopped, do not assume it ran.
- outcome_unknown: the call may or may not have happened; check its effect before repeating it.
- After you succeed another way, record the fix with write_error (outcome "resolved").`},
}

func reasoningGuideTool() toolkit.Tool {
	names := make([]string, 0, len(guideTopics)+1)
	for _, t := range guideTopics {
		names = append(names, t.name)
	}
	names = append(names, "all")
	enum := `"` + strings.Join(names, `", "`) + `"`
	return toolkit.Tool{
		Name: "reasoning_guide",
		Description: "Practical guidance on working with these tools: planning, fetching and calling tools, " +
			"editing files safely, debugging, running commands and handling failed calls. Call it when unsure " +
			"how to proceed.",
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"topic": {
					"type": "string",
					"description": "Section to read (default overview; all prints every section).",
					"enum": [` + enum + `]
				}
			},
			"additionalProperties": false
		}`),
		Concurrent: true,
		ReadOnly:   true,
		Timeout:    reasoningTimeout,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			if err := ctx.Err(); err != nil {
				return toolkit.Result{}, err
			}
			text, err := guide(c.Args.String("topic"))
			if err != nil {
				return toolkit.Result{}, err
			}
			return toolkit.Result{Content: text}, nil
		},
	}
}

// guide returns the text of one topic, or of all of them.
func guide(topic string) (string, error) {
	topic = strings.ToLower(strings.TrimSpace(topic))
	if topic == "" {
		topic = "overview"
	}
	var b strings.Builder
	for _, t := range guideTopics {
		if topic == "all" || topic == t.name {
			if b.Len() > 0 {
				b.WriteString("\n\n")
			}
			b.WriteString(t.text)
		}
	}
	if b.Len() == 0 {
		names := make([]string, len(guideTopics))
		for i, t := range guideTopics {
			names[i] = t.name
		}
		return "", fmt.Errorf("no topic %q; choose one of %s, or all", topic, strings.Join(names, ", "))
	}
	b.WriteString("\n")
	return b.String(), nil
}
