package service

import (
	"os/exec"
	"testing"
)

// TestPageScriptParses: page.js is valid JavaScript. A syntax error stops
// the whole operator page (no live events, no answers), which the browser
// tests only show as a time-out on a machine with Chromium; Node says
// which line at once.
func TestPageScriptParses(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; the browser tests load page.js where Chromium is")
	}
	if out, err := exec.Command(node, "--check", "page.js").CombinedOutput(); err != nil {
		t.Fatalf("node --check page.js: %v\n%s", err, out)
	}
}
