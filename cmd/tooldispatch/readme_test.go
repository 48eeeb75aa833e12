package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// readmeMainCommand returns the arguments of the README's main job, the
// "go run ./cmd/tooldispatch run …" line of its "Two commands" section,
// without "go run ./cmd/tooldispatch".
func readmeMainCommand(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Two commands\n")
	if !ok {
		t.Fatal(`README.md has no "## Two commands" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	const prefix = "go run ./cmd/tooldispatch "
	for _, line := range strings.Split(section, "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, prefix+"run ") {
			return strings.Fields(strings.TrimPrefix(line, prefix))
		}
	}
	t.Fatalf("the \"Two commands\" section of README.md has no %q line", prefix+"run")
	return nil
}

// tree lists the files under dir with their sizes and contents' lengths,
// for comparing before and after.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out = append(out, fmt.Sprintf("%s %v %d %s", rel, info.Mode(), info.Size(), info.ModTime()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestReadmeMainJobLeavesTheTestsAlone runs the README's main job as a
// newcomer does, from the repository's root, then the helpers the command's
// tests use: the job writes nothing into the repository, keeps its data in
// the state directory, and a test that copies the example workspace and
// runs a turn and "tools" there finds nothing the job left.
func TestReadmeMainJobLeavesTheTestsAlone(t *testing.T) {
	args := readmeMainCommand(t)
	if len(args) == 0 || args[0] != "run" {
		t.Fatalf("README main command %q is not a run", args)
	}
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	examples := filepath.Join(root, "examples", "workspace")
	before := tree(t, examples)

	for i := range 2 {
		cmd := command(t, nil, args...)
		cmd.Dir = root
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("README main job, run %d: %v\nstderr:\n%s", i+1, err, stderr.String())
		}
		out := parseRunOutput(t, stdout.String())
		if len(out.results) == 0 {
			t.Fatalf("README main job, run %d, printed no results", i+1)
		}
	}
	if diff := cmp.Diff(before, tree(t, examples)); diff != "" {
		t.Errorf("the README main job changed examples/workspace (-before +after):\n%s", diff)
	}
	data, err := defaultDataDir(examples)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(data, state+string(filepath.Separator)) {
		t.Fatalf("default data directory %s is not under the state directory %s", data, state)
	}
	if _, err := os.Stat(filepath.Join(data, "MANIFEST")); err != nil {
		t.Errorf("the README main job left no store in %s: %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(data, pidFileName)); !os.IsNotExist(err) {
		t.Errorf("the README main job left its holder record behind: %v", err)
	}

	// The command tests' helpers, in the same state directory the main job
	// used.
	ws := exampleWorkspace(t)
	if diff := cmp.Diff(before, tree(t, examples)); diff != "" {
		t.Errorf("copying the example workspace changed it (-before +after):\n%s", diff)
	}
	input := `{"auto_load_schemas":true,"message":{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"read_files","arguments":"{\"paths\":[\"data.csv\"]}"}}]}}`
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--provider", "claude-code", "--events=false", "-")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	// A fresh workspace has a fresh session: the main job's turns are
	// not in it, and the call runs.
	if diff := cmp.Diff([]string{"a:read_files:ok"}, out.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	e, stdout, stderr = testEnv(strings.NewReader(""))
	if code := e.main([]string{"session", "--workspace", ws}); code != exitOK {
		t.Fatalf("session: exit status %d; stderr:\n%s", code, stderr.String())
	}
	var sess struct {
		Tools []toolMessageJSON `json:"tools"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &sess); err != nil || len(sess.Tools) != 1 {
		t.Errorf("the copied workspace's session has %d tool messages (%v), want 1:\n%s", len(sess.Tools), err, stdout.String())
	}
	toolsWS := exampleWorkspace(t)
	e, _, stderr = testEnv(strings.NewReader(""))
	if code := e.main([]string{"tools", "--workspace", toolsWS}); code != exitOK {
		t.Fatalf("tools: exit status %d; stderr:\n%s", code, stderr.String())
	}
	if d, err := defaultDataDir(toolsWS); err != nil {
		t.Error(err)
	} else if _, err := os.Stat(d); err == nil {
		t.Errorf("tools created the data directory %s", d)
	}
	if _, err := os.Stat(filepath.Join(toolsWS, dataDirName)); err == nil {
		t.Errorf("tools created %s in the workspace", dataDirName)
	}
}

// TestDocsReferOnlyToTheRepository: the README and docs/ name no document
// that is not in the repository: every docs/*.md they mention exists, and
// none cites the section numbers of a specification kept elsewhere.
func TestDocsReferOnlyToTheRepository(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	docRef := regexp.MustCompile(`docs/[A-Za-z0-9_-]+\.md`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range docRef.FindAllString(string(b), -1) {
			if _, err := os.Stat(filepath.Join(root, ref)); err != nil {
				t.Errorf("%s refers to %s, which is not in the repository", f, ref)
			}
		}
		if m := regexp.MustCompile(`SPEC *(§|section)`).FindString(string(b)); m != "" {
			t.Errorf("%s cites %q, which is not in the repository (docs/CONTRACT.md is the contract)", f, m)
		}
	}
}
