package service

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRunDeclarationsLastForTheRun: client tools declared by a turn stay
// declared for the later turns of its run that leave client_tools out, in
// no other run; GET /v1/tools of the run lists them until the run ends.
func TestRunDeclarationsLastForTheRun(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	first := turn("r1", "all", call(t, "l1", "lookup", map[string]any{"q": "x"}))
	first["client_tools"] = []any{map[string]any{"type": "function", "function": map[string]any{"name": "lookup", "description": "Look up.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}}}}
	if got := statuses(f.postTurn("rd", first).Messages); !cmp.Equal(got, []string{"client_pending"}) {
		t.Fatalf("the declaring turn: %v, want client_pending", got)
	}
	if got := statuses(f.postTurn("rd", turn("r1", "all", call(t, "l2", "lookup", map[string]any{"q": "y"}))).Messages); !cmp.Equal(got, []string{"client_pending"}) {
		t.Errorf("a later turn of the run without client_tools: %v, want client_pending", got)
	}
	if got := statuses(f.postTurn("rd", turn("r2", "all", call(t, "l3", "lookup", map[string]any{"q": "z"}))).Messages); !cmp.Equal(got, []string{"unknown_tool"}) {
		t.Errorf("a turn of another run: %v, want unknown_tool", got)
	}
	listed := func() bool {
		t.Helper()
		resp, body := f.do("GET", "/v1/tools?provider=all&session=rd&run=r1", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/tools: %d %s", resp.StatusCode, body)
		}
		return strings.Contains(string(body), `"lookup"`)
	}
	if !listed() {
		t.Errorf("GET /v1/tools of the run does not list its client tool")
	}
	if resp, body := f.do("DELETE", "/v1/sessions/rd/runs/r1", nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("ending the run: %d %s", resp.StatusCode, body)
	}
	if listed() {
		t.Errorf("GET /v1/tools still lists the client tool of a run that ended")
	}
}
