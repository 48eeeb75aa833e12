package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestSkippedCallNamesWhatToSet: a call that changes things and is skipped
// because approval is none says, in the terms of the route it came by,
// what to set: run's --approve (whose default without a terminal is none),
// the request body's "approve", or serve's --approve.
func TestSkippedCallNamesWhatToSet(t *testing.T) {
	input := envelope(`"provider":"claude-code","auto_load_schemas":true`, editCall("e1", "a.txt", "a"))
	skipped := func(t *testing.T, content string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(content, w) {
				t.Errorf("the skipped call says %q; want it to name %s", content, w)
			}
		}
	}
	t.Run("run without a terminal", func(t *testing.T) {
		out := runTurns(t, input, "--workspace", t.TempDir(), "--data", t.TempDir())
		if len(out.results) != 1 || out.results[0].Status != "skipped" {
			t.Fatalf("results %+v", out.results)
		}
		skipped(t, out.results[0].Content, "--approve all", "--approve ask on a terminal")
	})
	t.Run("run --approve none", func(t *testing.T) {
		out := runTurns(t, input, "--workspace", t.TempDir(), "--data", t.TempDir(), "--approve", "none")
		skipped(t, out.results[0].Content, "--approve none", "--approve ask", "--approve all")
	})
	t.Run("serve, a body that says none", func(t *testing.T) {
		s := startServe(t, "--workspace", t.TempDir(), "--data", t.TempDir())
		code, ms := s.turn(t, "hint", envelope(`"provider":"claude-code","auto_load_schemas":true,"approve":"none"`, editCall("e1", "a.txt", "a")))
		if code != http.StatusOK || len(ms) != 1 || ms[0].Status != "skipped" {
			t.Fatalf("%d %+v", code, ms)
		}
		skipped(t, ms[0].Content, `"approve":"ask"`, "request body")
	})
	t.Run("serve --approve none", func(t *testing.T) {
		s := startServe(t, "--workspace", t.TempDir(), "--data", t.TempDir(), "--approve", "none")
		code, ms := s.turn(t, "hint", envelope(`"provider":"claude-code","auto_load_schemas":true`, editCall("e1", "a.txt", "a")))
		if code != http.StatusOK || len(ms) != 1 || ms[0].Status != "skipped" {
			t.Fatalf("%d %+v", code, ms)
		}
		skipped(t, ms[0].Content, "serve was started with --approve none")
	})
}
