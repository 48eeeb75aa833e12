package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/tooldispatch/tooldispatch/toolkit/mcp/mcptest"
)

// binary is the tooldispatch command built for the tests that run it as a
// child process.
var binary string

func TestMain(m *testing.M) {
	// Run as an MCP server of the tests' own (mcptest) when asked to.
	if mode := os.Getenv(mcptest.Env); mode != "" {
		os.Exit(mcptest.Serve(mode))
	}
	dir, err := os.MkdirTemp("", "tooldispatch-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "tooldispatch")
	build := exec.Command("go", "build", "-o", binary, "../cmd/tooldispatch")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building tooldispatch:", err)
		os.Exit(1)
	}
	code := 0
	func() {
		defer func() {
			if r := recover(); r != nil {
				code = 1
			}
		}()
		goleak.VerifyTestMain(m,
			goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
			// regexp2's match-timeout clock stops itself ~1 s after the last match.
			goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock"))
	}()
	os.RemoveAll(dir)
	os.Exit(code)
}
