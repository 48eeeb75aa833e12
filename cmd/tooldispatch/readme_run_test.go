package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// readmeRunTimeout bounds one README block run by a test.
const readmeRunTimeout = 3 * time.Minute

// readmeSection returns the text under a heading of README.md ("## Your
// first turn", "### The service with curl") up to the next heading of the
// same or a higher level.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q section", heading)
	}
	level := strings.Repeat("#", strings.Index(heading, " "))
	for _, l := range strings.SplitAfter(section, "\n") {
		if h, _, _ := strings.Cut(l, " "); strings.HasPrefix(l, "#") && len(h) <= len(level) && strings.Trim(h, "#") == "" {
			section, _, _ = strings.Cut(section, l)
			break
		}
	}
	return section
}

// fencedBlock is one fenced code block: its info string and its text.
type fencedBlock struct {
	info, text string
}

// fencedBlocks lists the fenced code blocks of a README section, in order.
func fencedBlocks(section string) []fencedBlock {
	var out []fencedBlock
	var cur *fencedBlock
	for _, l := range strings.SplitAfter(section, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &fencedBlock{info: strings.TrimSpace(strings.TrimPrefix(l, "```"))}
		case cur != nil && strings.TrimSpace(l) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += l
		}
	}
	return out
}

// shimPreamble runs "go run ./cmd/tooldispatch …" of a README block with
// the binary the tests built (the same code, without compiling it again);
// every other go command is the real one.
const shimPreamble = `set -eo pipefail
go() {
  if [ "$1" = run ] && [ "$2" = ./cmd/tooldispatch ]; then shift 2; "$TOOLDISPATCH_BIN" "$@"; else command go "$@"; fi
}
`

// runShell runs a README shell block with bash in dir and returns its
// stdout; a failure fails the test.
func runShell(t *testing.T, dir, block string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readmeRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", shimPreamble+block)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append(env, "TOOLDISPATCH_BIN="+binary(t))...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README block failed: %v\n%s\nstdout:\n%s\nstderr:\n%s", err, block, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// matchLines compares output lines with the lines a README block shows,
// where "…" in a shown line stands for any text.
func matchLines(t *testing.T, shown, got string) {
	t.Helper()
	want := strings.Split(strings.TrimSpace(shown), "\n")
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(want) != len(lines) {
		t.Fatalf("the README shows %d lines, the command printed %d:\n%s", len(want), len(lines), got)
	}
	for i, w := range want {
		parts := strings.Split(w, "…")
		for j := range parts {
			parts[j] = regexp.QuoteMeta(parts[j])
		}
		if !regexp.MustCompile(`^` + strings.Join(parts, `(?s:.*)`) + `$`).MatchString(lines[i]) {
			t.Errorf("line %d: the README shows\n  %s\nthe command printed\n  %.400s", i+1, w, lines[i])
		}
	}
}

// TestReadmeFirstTurn runs the shell blocks of the README's "Your first
// turn" as written, from the repository's root, and compares what they
// print with the output the README shows after each. Nothing is written
// into the repository: the data directory goes to $XDG_STATE_HOME.
func TestReadmeFirstTurn(t *testing.T) {
	blocks := fencedBlocks(readmeSection(t, "## Your first turn"))
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	before := tree(t, filepath.Join(root, "examples", "workspace"))
	state := t.TempDir()
	ran := 0
	for i, b := range blocks {
		if b.info != "sh" {
			continue
		}
		if i+1 >= len(blocks) || blocks[i+1].info != "text" {
			t.Fatalf("the README shows no output after block %d:\n%s", i+1, b.text)
		}
		matchLines(t, blocks[i+1].text, runShell(t, root, b.text, "XDG_STATE_HOME="+state))
		ran++
	}
	if ran != 2 {
		t.Errorf("ran %d shell blocks of \"Your first turn\", want 2", ran)
	}
	if diff := cmp.Diff(before, tree(t, filepath.Join(root, "examples", "workspace"))); diff != "" {
		t.Errorf("the README's first turn changed examples/workspace (-before +after):\n%s", diff)
	}

	// What the section says of a direct call: deferred by default,
	// schema_returned under claude-code without auto_load_schemas.
	direct := `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"calculate","arguments":"{\"expression\":\"6 * 7\"}"}}]}`
	for provider, want := range map[string]string{"openai": "c1:calculate:deferred", "claude-code": "c1:calculate:schema_returned"} {
		out := runTurns(t, direct, "--workspace", t.TempDir(), "--data", t.TempDir(), "--provider", provider)
		if diff := cmp.Diff([]string{want}, out.statuses()); diff != "" {
			t.Errorf("a direct call under %s (-want +got):\n%s", provider, diff)
		}
	}
}

// TestReadmeServiceWithCurl runs the curl walkthrough of the README's "The
// service with curl" as written against a real serve the test starts:
// a turn that needs approval, its event stream, the confirmation, the
// session read back.
func TestReadmeServiceWithCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	var walk string
	for _, b := range fencedBlocks(readmeSection(t, "### The service with curl")) {
		if b.info == "sh" && strings.Contains(b.text, "curl ") {
			walk = b.text
		}
	}
	if walk == "" {
		t.Fatal(`"The service with curl" has no curl block`)
	}
	ws := t.TempDir()
	s := startServe(t, "--workspace", ws, "--data", t.TempDir(), "--confirm-timeout", "2m")
	out := runShell(t, t.TempDir(), walk, "TOOLDISPATCH_URL="+s.base)

	for _, want := range []string{
		"event: tool_confirm", `"args_hash":"`, `{"status":"accepted"}`, "event: confirm_decided",
		"event: tool_call_start", "event: result", `"status":"ok"`, `"tool_call_id":"c1"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the walkthrough's output lacks %s:\n%s", want, out)
		}
	}
	// Every event of the stream has its id.
	if ids, evs := strings.Count(out, "\nid: "), strings.Count(out, "\nevent: "); ids < evs-1 {
		t.Errorf("%d events but %d ids:\n%s", evs, ids, out)
	}
	// The session read back is the last line: the call ran, approved.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, `{"tools":[{"role":"tool","tool_call_id":"c1","name":"edit_file","status":"ok"`) {
		t.Errorf("the session read back: %s", last)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "hello.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("hello.txt = %q, %v", b, err)
	}
}

// TestReadmeEmbedding compiles and runs the README's embedding program as
// written, in a module of its own that uses this checkout (a go.work),
// and compares what it prints with the output the README shows: the
// snippet and the code cannot drift apart, and its Approver is asked.
func TestReadmeEmbedding(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a program")
	}
	blocks := fencedBlocks(readmeSection(t, "## Embedding"))
	if len(blocks) < 2 || blocks[0].info != "go" || blocks[1].info != "text" {
		t.Fatalf(`"Embedding" must open with a go block and the text it prints; it has %+v`, blocks)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":  "module readme\n\ngo 1.26.0\n",
		"go.work": "go 1.26.0\n\nuse (\n\t.\n\t" + root + "\n)\n",
		"main.go": blocks[0].text,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), readmeRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go run of the README's program: %v\n%s", err, stderr.String())
	}
	if diff := cmp.Diff(blocks[1].text, stdout.String()); diff != "" {
		t.Errorf("the README's program prints (-README +got):\n%s", diff)
	}
}
