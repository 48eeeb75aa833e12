package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/integration_test/otlptest"
)

// TestClusterTraceAcrossMembers: a turn sent with a traceparent header to
// a member that does not own its session is one trace across two members:
// the dispatch span on the member that took the request, the turn and its
// passes and calls on the owner, both sent to the same OTLP receiver.
func TestClusterTraceAcrossMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	rcv := otlptest.Start()
	defer rcv.Close()
	cfg := filepath.Join(t.TempDir(), "tooldispatch.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[telemetry]\ntraces = true\nendpoint = %q\n", rcv.URL())), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	ms, ports := startClusterWith(t, 2, ws, clusterSetup{config: cfg,
		env: []string{"OTEL_BSP_SCHEDULE_DELAY=50"}}) // milliseconds: send soon
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first, err := postTurn(ctx, ms[0].http, "traced", "", commandCall("warm", "true"))
	if err != nil {
		t.Fatal(err)
	}
	owner := ownerOf(t, ports, 2, first.Member)
	entry := 1 - owner

	const traceID, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	body, _ := json.Marshal(map[string]any{"run": "r", "provider": "claude-code", "auto_load_schemas": true, "approve": "all",
		"message": map[string]any{"role": "assistant", "tool_calls": []any{commandCall("a", "echo a"), commandCall("b", "echo b")}}})
	req, _ := http.NewRequestWithContext(ctx, "POST", ms[entry].http+"/v1/sessions/traced/turns", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parent+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tr turnReply
	_ = json.NewDecoder(resp.Body).Decode(&tr)
	resp.Body.Close()
	if resp.StatusCode != 200 || tr.Member != first.Member {
		t.Fatalf("turn: %d %+v (owner %s)", resp.StatusCode, tr, first.Member)
	}
	spans, err := rcv.WaitFor(ctx, func(s []otlptest.Span) bool {
		// The turn span ends after its commit span and may come in a
		// later export batch: wait for all three.
		tr := otlptest.Trace(s, traceID)
		return len(otlptest.Named(tr, "tooldispatch.commit")) == 1 && len(otlptest.Named(tr, "tooldispatch.turn")) == 1 &&
			len(otlptest.Named(tr, "tooldispatch.dispatch")) == 1
	})
	spans = otlptest.Trace(spans, traceID)
	tree := otlptest.Tree(spans, "service.instance.id", "gen_ai.tool.call.id", "tooldispatch.status")
	if err != nil {
		t.Fatalf("the trace never arrived whole: %v\n%s", err, tree)
	}
	t.Logf("one turn across two members:\n%s", tree)
	dispatch, turn := otlptest.Named(spans, "tooldispatch.dispatch")[0], otlptest.Named(spans, "tooldispatch.turn")
	if len(turn) != 1 {
		t.Fatalf("%d turn spans", len(turn))
	}
	entryAddr := fmt.Sprintf("127.0.0.1:%d", ports[2+entry])
	if dispatch.ParentID != parent || dispatch.Resource["service.instance.id"] != entryAddr {
		t.Errorf("dispatch span: parent %s on %s, want %s on %s", dispatch.ParentID, dispatch.Resource["service.instance.id"], parent, entryAddr)
	}
	if turn[0].ParentID != dispatch.SpanID || !strings.HasSuffix(first.Member, turn[0].Resource["service.instance.id"]) {
		t.Errorf("turn span: parent %s on %s, want %s on %s", turn[0].ParentID, turn[0].Resource["service.instance.id"], dispatch.SpanID, first.Member)
	}
	if n := len(otlptest.Named(spans, "execute_tool run_command")); n != 2 {
		t.Errorf("%d execute_tool spans, want 2", n)
	}
}
