package mcptest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// npmPackages are the reference servers the tests run from
// integration_test/mcpservers, installed there by `npm ci`.
var npmPackages = []string{"server-everything", "server-filesystem", "server-memory"}

var (
	npmOnce sync.Once
	npmErr  error
	npmOut  []byte
)

// ServersDir returns integration_test/mcpservers with its npm packages
// installed. When node_modules is missing it runs `npm ci` there (once per
// test binary, from the lock file: nothing is fetched at run time of a
// server); it skips t only when node or npm is not installed.
func ServersDir(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the MCP server tests run the npm reference servers with node")
	}
	dir, err := serversDir()
	if err != nil {
		t.Fatal(err)
	}
	if !installed(dir) {
		if _, err := exec.LookPath("npm"); err != nil {
			t.Skipf("npm is not installed and %s has no node_modules: run `npm ci` there to enable the MCP server tests", dir)
		}
		npmOnce.Do(func() {
			cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
			cmd.Dir = dir
			npmOut, npmErr = cmd.CombinedOutput()
		})
		if npmErr != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, npmErr, npmOut)
		}
		if !installed(dir) {
			t.Fatalf("npm ci in %s did not install the MCP servers:\n%s", dir, npmOut)
		}
	}
	return dir
}

// Command is the argv that runs npm server pkg (server-everything,
// server-filesystem, server-memory) from its local install, with args.
func Command(t testing.TB, pkg string, args ...string) []string {
	t.Helper()
	script := filepath.Join(ServersDir(t), "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	return append([]string{"node", script}, args...)
}

// serversDir is integration_test/mcpservers of this module.
func serversDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("mcptest: cannot find the module's folder")
	}
	// file is <module>/toolkit/mcp/mcptest/npm.go.
	root := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(file))))
	return filepath.Join(root, "integration_test", "mcpservers"), nil
}

// installed reports whether the reference servers are in dir.
func installed(dir string) bool {
	for _, name := range npmPackages {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", name, "dist", "index.js")); err != nil {
			return false
		}
	}
	return true
}
