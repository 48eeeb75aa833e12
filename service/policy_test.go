package service

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/actors"
)

// TestApproveIsACeiling: a body's approve may lower Options.Approve, never
// raise it; a body without approve gets it (SPEC §16).
func TestApproveIsACeiling(t *testing.T) {
	f := newFixture(t, fixtureOpts{approve: actors.ApproveNone})
	edit := func(id string) map[string]any {
		return call(t, id, "edit_file", map[string]string{"path": "notes.md", "content": "changed\n"})
	}
	for _, approve := range []string{actors.ApproveAll, actors.ApproveAsk, ""} {
		t.Run("body "+approve, func(t *testing.T) {
			body := turn("r-"+approve, approve, edit("e1"))
			if approve == "" {
				delete(body, "approve")
			}
			r := f.postTurn("ceiling", body)
			if got := statuses(r.Messages); !slices.Equal(got, []string{"skipped"}) {
				t.Fatalf("statuses %v", got)
			}
			if !strings.Contains(r.Messages[0].Content, "does not allow calls that change things") {
				t.Errorf("skipped for another reason: %q", r.Messages[0].Content)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "notes.md")); string(b) != workspaceFiles["notes.md"] {
		t.Errorf("notes.md changed: %q", b)
	}
}

// TestExcludeIsACeiling: the operator's exclusions hold whatever a body
// declares, for turns and for the tools view.
func TestExcludeIsACeiling(t *testing.T) {
	f := newFixture(t, fixtureOpts{exclude: []string{"run_command"}})
	for _, exclude := range [][]string{nil, {}, {"calculate"}} {
		body := turn("r", actors.ApproveAll, call(t, "c1", "run_command", map[string]any{"argv": []string{"touch", "pwned.txt"}}))
		if exclude != nil {
			body["exclude"] = exclude
		}
		r := f.postTurn("exclude", body)
		if got := statuses(r.Messages); !slices.Equal(got, []string{"unknown_tool"}) {
			t.Errorf("exclude %v: statuses %v", exclude, got)
		}
	}
	if _, err := os.Stat(filepath.Join(f.dir, "pwned.txt")); err == nil {
		t.Error("an excluded run_command ran")
	}
	resp, body := f.do("GET", "/v1/tools?provider=claude-code&session=exclude&run=r", nil)
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), `"name":"run_command"`) || !strings.Contains(string(body), `"name":"edit_file"`) {
		t.Errorf("GET /v1/tools: %d %.300s", resp.StatusCode, body)
	}
}

// TestAutoLoadSchemasDefault: Options.AutoLoadSchemas is the default of
// bodies that do not set auto_load_schemas.
func TestAutoLoadSchemasDefault(t *testing.T) {
	f := newFixture(t, fixtureOpts{autoLoad: true})
	body := turn("a", actors.ApproveAll, call(t, "c1", "calculate", map[string]string{"expression": "1+1"}))
	delete(body, "auto_load_schemas")
	if got := statuses(f.postTurn("autoload", body).Messages); !slices.Equal(got, []string{"ok"}) {
		t.Errorf("without auto_load_schemas: %v", got)
	}
	body = turn("b", actors.ApproveAll, call(t, "c2", "calculate", map[string]string{"expression": "1+1"}))
	body["auto_load_schemas"] = false
	if got := statuses(f.postTurn("autoload", body).Messages); !slices.Equal(got, []string{"schema_returned"}) {
		t.Errorf("auto_load_schemas false: %v", got)
	}
}
