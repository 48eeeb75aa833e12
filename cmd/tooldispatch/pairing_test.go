package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRunMadeUpIDsNeverCollide: a call without an id gets one made up,
// and it never takes the id another call of the turn carries, so that
// call is not refused as a repeat and each reply pairs with its call.
func TestRunMadeUpIDsNeverCollide(t *testing.T) {
	ws := exampleWorkspace(t)
	call := `{"id":%q,"type":"function","function":{"name":"find_tools","arguments":"{\"query\":\"select:%s\"}"}}`
	input := `{"role":"assistant","tool_calls":[` +
		strings.Join([]string{
			strings.NewReplacer("%q", `""`, "%s", "calculate").Replace(call),
			strings.NewReplacer("%q", `"call_1"`, "%s", "read_files").Replace(call),
		}, ",") + `]}`
	e, stdout, stderr := testEnv(strings.NewReader(input))
	code, out := runInProcess(t, e, stdout, stderr, "--workspace", ws, "--data", t.TempDir(), "--events=false", "-")
	if code != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	want := []string{"call_1_2:find_tools:ok", "call_1:find_tools:ok"}
	if diff := cmp.Diff(want, out.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
}
