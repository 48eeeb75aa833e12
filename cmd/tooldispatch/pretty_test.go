package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/messages"
)

const prettyInput = `{"role":"assistant","tool_calls":[` +
	`{"id":"c1","type":"function","function":{"name":"find_tools","arguments":"{\"query\":\"select:calculate\"}"}},` +
	`{"id":"c2","type":"function","function":{"name":"no_such_tool","arguments":"{}"}}]}`

// TestRunPretty: --pretty prints one line per result — turn, call id, tool,
// status, first line of content — and the events as indented lines, and no
// JSON.
func TestRunPretty(t *testing.T) {
	ws := exampleWorkspace(t)
	e, stdout, stderr := testEnv(strings.NewReader(prettyInput))
	if code := e.main([]string{"run", "--workspace", ws, "--data", t.TempDir(), "--approve", "none", "--pretty", "-"}); code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	var results, events []string
	for _, line := range strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n") {
		if json.Valid([]byte(line)) {
			t.Errorf("line %q is JSON", line)
		}
		if strings.HasPrefix(line, "    ") {
			events = append(events, line)
		} else {
			results = append(results, line)
		}
	}
	if len(results) != 2 {
		t.Fatalf("%d result lines, want 2:\n%s", len(results), stdout.String())
	}
	for i, want := range [][]string{{"1", "c1", "find_tools", "ok"}, {"1", "c2", "no_such_tool", "unknown_tool"}} {
		if got := strings.Fields(results[i]); len(got) < 5 || strings.Join(got[:4], " ") != strings.Join(want, " ") {
			t.Errorf("result line %q, want it to start with %q and carry content", results[i], want)
		}
	}
	if !strings.Contains(stdout.String(), "    tool_call ") || len(events) < 4 {
		t.Errorf("%d event lines, want the calls' events indented:\n%s", len(events), stdout.String())
	}
}

// TestRunPrettyOnTerminal: on a terminal run is pretty unless
// --pretty=false; piped, it prints JSON Lines.
func TestRunPrettyOnTerminal(t *testing.T) {
	ws := exampleWorkspace(t)
	for _, tt := range []struct {
		name     string
		terminal bool
		flags    []string
		wantJSON bool
	}{
		{"terminal", true, nil, false},
		{"terminal, --pretty=false", true, []string{"--pretty=false"}, true},
		{"piped", false, nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, stdout, stderr := testEnv(strings.NewReader(prettyInput))
			e.stdoutTerminal = tt.terminal
			args := append([]string{"run", "--workspace", ws, "--data", t.TempDir(), "--approve", "none", "--events=false"}, tt.flags...)
			if code := e.main(append(args, "-")); code != exitOK {
				t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
			}
			lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
			if len(lines) != 2 {
				t.Fatalf("%d lines, want 2:\n%s", len(lines), stdout.String())
			}
			for _, l := range lines {
				if json.Valid([]byte(l)) != tt.wantJSON {
					t.Errorf("line %q: JSON %v, want %v", l, !tt.wantJSON, tt.wantJSON)
				}
			}
		})
	}
}

// TestPrettyLineIsSafeOnATerminal: a tool's content cannot send escape
// sequences or extra lines to the terminal.
func TestPrettyLineIsSafeOnATerminal(t *testing.T) {
	line := prettyResult(3, &messages.ToolMessage{ToolCallId: "c\x1b[2J", Name: "read_files", Status: "ok",
		Content: "\x1b[31mred\x1b[0m and \u009b more\rover\nsecond line"})
	if strings.ContainsAny(line, "\x1b\r\u009b") || strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
		t.Errorf("line %q carries control characters or more than one line", line)
	}
	if !strings.Contains(line, "red") || strings.Contains(line, "second line") {
		t.Errorf("line %q is not the first line of the content", line)
	}
}
