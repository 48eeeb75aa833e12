package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tooldispatch/tooldispatch/toolkit/mcp/mcptest"
)

var fixedTime = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// goleakOptions ignore the goroutines that outlive a test on purpose.
var goleakOptions = []goleak.Option{
	// protoactor's dead-letter throttle goroutine outlives its actor system
	// (it waits on a ticker it never stops).
	goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
	// regexp2's match-timeout clock stops itself ~1 s after the last match.
	goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock"),
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(mcptest.Env); mode != "" {
		// This process is a misbehaving MCP server a test configured.
		os.Exit(mcptest.Serve(mode))
	}
	// Default data directories go to a state directory of this test
	// binary, never to the developer's own (the binaries the tests start
	// inherit it).
	state, err := os.MkdirTemp("", "tooldispatch-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_STATE_HOME", state)
	code := m.Run()
	os.RemoveAll(state)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(goleakOptions...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// binary builds the command once per test binary and returns its path.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "tooldispatch-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "tooldispatch")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// exampleWorkspace copies examples/workspace into a temporary directory,
// so tests that edit files leave the repository alone. A data directory an
// earlier version left there (.tooldispatch) is not copied: tests never
// depend on what a previous run left.
func exampleWorkspace(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "..", "examples", "workspace")
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == dataDirName {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatalf("copying the example workspace: %v", err)
	}
	return dst
}

// runOutput is run's stdout split into events and tool messages.
type runOutput struct {
	events  []eventLine
	results []toolMessageJSON
}

// parseRunOutput parses run's JSON Lines; every line must be an event or a
// tool message.
func parseRunOutput(t *testing.T, stdout string) runOutput {
	t.Helper()
	var out runOutput
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var probe struct {
			Event string `json:"event"`
			Role  string `json:"role"`
		}
		if err := json.Unmarshal(line, &probe); err != nil {
			t.Fatalf("output line %q is not JSON: %v", line, err)
		}
		switch {
		case probe.Event != "":
			var ev eventLine
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatal(err)
			}
			out.events = append(out.events, ev)
		case probe.Role == "tool":
			var m toolMessageJSON
			if err := json.Unmarshal(line, &m); err != nil {
				t.Fatal(err)
			}
			out.results = append(out.results, m)
		default:
			t.Fatalf("output line %q is neither an event nor a tool message", line)
		}
	}
	return out
}

// statuses returns "id:name:status" for each result.
func (o runOutput) statuses() []string {
	var s []string
	for _, r := range o.results {
		s = append(s, r.ToolCallID+":"+r.Name+":"+r.Status)
	}
	return s
}
