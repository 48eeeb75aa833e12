package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
	"github.com/tooldispatch/tooldispatch/toolkit/interact"
	"github.com/tooldispatch/tooldispatch/toolkit/web"
)

// boundEnv is a dispatcher with every built-in tool that changes workspace
// files, whose confirmations an Approver answers: approve is called for each
// request and answers yes.
type boundEnv struct {
	t     *testing.T
	dir   string
	d     *actors.Dispatcher
	url   string // a loopback server that serves "downloaded\n"
	mu    sync.Mutex
	asked []actors.ApprovalRequest // guarded by mu
	runs  int                      // each dispatch is a run of its own: no de-duplication across them
}

func newBoundEnv(t *testing.T, approve func(actors.ApprovalRequest)) *boundEnv {
	t.Helper()
	e := &boundEnv{t: t, dir: t.TempDir()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "downloaded\n") }))
	t.Cleanup(srv.Close)
	e.url = srv.URL + "/file.txt"
	store, err := badger.Open(badger.TestOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := builtin.OpenWorkspace(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	builtin.Register(reg, builtin.Deps{Workspace: ws, Versions: store})
	interact.Register(reg, interact.Deps{Workspace: ws, Versions: store})
	w := web.Register(reg, web.Deps{Config: web.Config{AllowLoopback: true}, Workspace: ws})
	e.d, err = actors.New(actors.Config{Registry: reg, Store: store,
		Approver: func(ctx context.Context, r actors.ApprovalRequest) (bool, string) {
			approve(r)
			e.mu.Lock()
			e.asked = append(e.asked, r)
			e.mu.Unlock()
			return true, ""
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.d.Close(ctx); err != nil {
			t.Error(err)
		}
		w.Close()
		if err := store.Close(); err != nil {
			t.Error(err)
		}
		ws.Close()
	})
	return e
}

// lastAsked is the last request the Approver got for callID.
func (e *boundEnv) lastAsked(callID string) actors.ApprovalRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.asked) - 1; i >= 0; i-- {
		if e.asked[i].CallID == callID {
			return e.asked[i]
		}
	}
	e.t.Fatalf("the Approver was never asked about %s", callID)
	return actors.ApprovalRequest{}
}

func (e *boundEnv) write(name, content string) {
	e.t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(e.dir, name)), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, name), []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *boundEnv) read(name string) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, name))
	if os.IsNotExist(err) {
		return "<missing>"
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

func (e *boundEnv) dispatch(calls ...*messages.ToolCall) *messages.TurnResult {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.runs++
	r, err := e.d.Dispatch(ctx, &messages.DispatchTurn{Session: "s", Run: fmt.Sprint("r", e.runs), Provider: toolkit.ProviderClaudeCode,
		AutoLoadSchemas: true, Approve: actors.ApproveAsk, Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: calls}})
	if err != nil {
		e.t.Fatalf("dispatch: %v", err)
	}
	return r
}

func boundCall(id, name string, args map[string]any) *messages.ToolCall {
	js, _ := json.Marshal(args)
	return &messages.ToolCall{Id: id, Type: "function", Function: &messages.FunctionCall{Name: name, Arguments: string(js)}}
}

// boundCases are the tools that change workspace files, each with a call
// that changes target.txt (or reports/out.html) and the content the file
// has before.
func boundCases(e *boundEnv) []struct {
	name, path, before string
	call               *messages.ToolCall
} {
	return []struct {
		name, path, before string
		call               *messages.ToolCall
	}{
		{"edit_file content", "target.txt", "old\n", boundCall("x", "edit_file", map[string]any{"path": "target.txt", "content": "new\n"})},
		{"edit_file patch", "target.txt", "old\n", boundCall("x", "edit_file", map[string]any{"path": "target.txt", "old_string": "old", "new_string": "new"})},
		{"remove_file", "target.txt", "old\n", boundCall("x", "remove_file", map[string]any{"path": "target.txt"})},
		{"restore_file", "target.txt", "old\n", boundCall("x", "restore_file", map[string]any{"path": "target.txt", "version": 1})},
		{"write_result", "target.txt", "old\n", boundCall("x", "write_result", map[string]any{"path": "target.txt", "content": "new\n", "format": "text"})},
		{"html_template", "reports/out.html", "old\n", boundCall("x", "html_template", map[string]any{"template": "<p>{{.v}}</p>", "data": map[string]any{"v": "new"}, "output_path": "reports/out.html"})},
		{"download_file", "target.txt", "old\n", boundCall("x", "download_file", map[string]any{"url": e.url, "path": "target.txt", "overwrite": true})},
	}
}

// TestApprovalBoundToFileState: for every tool that changes workspace
// files, an approval given through the embedder's Approver holds only for
// the files as its preview read them. Unchanged, the approved call runs;
// changed after the preview by something else (another process), or by an
// earlier call of the same turn, it does not run: skipped, saying so, with
// a next: line, and the file keeps what the other writer left.
func TestApprovalBoundToFileState(t *testing.T) {
	for _, changed := range []string{"unchanged", "by another process", "by an earlier call"} {
		t.Run(changed, func(t *testing.T) {
			var e *boundEnv
			e = newBoundEnv(t, func(r actors.ApprovalRequest) {
				if changed == "by another process" && r.CallID == "x" {
					for _, p := range []string{"target.txt", "reports/out.html"} {
						if _, err := os.Stat(filepath.Join(e.dir, p)); err == nil {
							e.write(p, "written meanwhile: old\n")
						}
					}
				}
			})
			for _, tc := range boundCases(e) {
				t.Run(tc.name, func(t *testing.T) {
					e.write(tc.path, "version one\n")
					// A version 1 to restore (restore_file), then the content before.
					e.dispatch(boundCall("v", "edit_file", map[string]any{"path": tc.path, "content": tc.before}))
					calls := []*messages.ToolCall{tc.call}
					if changed == "by an earlier call" {
						calls = []*messages.ToolCall{boundCall("w", "edit_file", map[string]any{"path": tc.path, "content": "written meanwhile: old\n"}), tc.call}
					}
					r := e.dispatch(calls...)
					m := r.Messages[len(r.Messages)-1]
					req := e.lastAsked("x")
					if req.StateHash == "" || req.Diff == "" && req.Note == "" {
						t.Errorf("the Approver was not shown a preview bound to the file: %+v", req)
					}
					if changed == "by an earlier call" && !strings.Contains(req.Note, "w (edit_file)") {
						t.Errorf("the preview does not say that the earlier call w may change the file: note %q", req.Note)
					}
					if changed == "unchanged" {
						if m.Status != "ok" {
							t.Fatalf("the approved call on an unchanged file: %s %q", m.Status, m.Content)
						}
						if got := e.read(tc.path); got == tc.before {
							t.Errorf("%s still holds %q: the call changed nothing", tc.path, got)
						}
						return
					}
					if m.Status != "skipped" || !strings.Contains(m.Content, "the file changed after") || !strings.Contains(m.Content, "\nnext: ") {
						t.Errorf("the call = %s %q, want skipped: the file changed after the approval, with a next: line", m.Status, m.Content)
					}
					if got := e.read(tc.path); got != "written meanwhile: old\n" {
						t.Errorf("%s = %q, want what the other writer left", tc.path, got)
					}
				})
			}
		})
	}
}
