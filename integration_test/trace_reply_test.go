package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/integration_test/otlptest"
)

// TestClusterAnswerTraceAcrossMembers: an ask_user answer and a
// confirmation posted with a traceparent header to the member that does
// not own the session join the caller's trace: the request's span on that
// member is a child of the caller's span, and its delivery on the owner
// (where the call waits) a child of that, both sent to one OTLP receiver.
func TestClusterAnswerTraceAcrossMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	rcv := otlptest.Start()
	defer rcv.Close()
	cfg := filepath.Join(t.TempDir(), "tooldispatch.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[telemetry]\ntraces = true\nendpoint = %q\n", rcv.URL())), 0o600); err != nil {
		t.Fatal(err)
	}
	ms, ports := startClusterWith(t, 2, t.TempDir(), clusterSetup{config: cfg,
		env: []string{"OTEL_BSP_SCHEDULE_DELAY=50"}}) // milliseconds: send soon
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	first, err := postTurn(ctx, ms[0].http, "asked", "", commandCall("warm", "true"))
	if err != nil {
		t.Fatal(err)
	}
	owner := ownerOf(t, ports, 2, first.Member)
	entry := 1 - owner
	c := http.DefaultClient
	evs := followEvents(t, ctx, c, ms[entry].http, "asked")

	const traceID, parent = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
	header := []string{"traceparent", "00-" + traceID + "-" + parent + "-01"}
	done := make(chan error, 1)
	go func() {
		code, body, err := postJSON(ctx, c, ms[owner].http+"/v1/sessions/asked/turns", map[string]any{
			"run": "r", "provider": "claude-code", "auto_load_schemas": true, "approve": "ask",
			"message": map[string]any{"role": "assistant", "tool_calls": []any{
				toolCall("q", "ask_user", map[string]any{"question": "Go on?"}),
				commandCall("w", "echo confirmed"),
			}}})
		if err == nil && code != 200 {
			err = fmt.Errorf("status %d: %s", code, body)
		}
		done <- err
	}()
	// The confirmation is asked first (pass 1), then the question (pass 2).
	conf := waitEvent(t, ctx, evs, "tool_confirm")
	if code, body, err := postJSON(ctx, c, ms[entry].http+"/v1/sessions/asked/confirm/w",
		map[string]any{"approve": true, "args_hash": conf["args_hash"]}, header...); err != nil || code != 200 {
		t.Fatalf("confirm on the other member: %d %s %v", code, body, err)
	}
	waitEvent(t, ctx, evs, "ask_user")
	if code, body, err := postJSON(ctx, c, ms[entry].http+"/v1/sessions/asked/answer/q", map[string]any{"text": "yes"}, header...); err != nil || code != 200 {
		t.Fatalf("answer on the other member: %d %s %v", code, body, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Each member sends its spans in its own batches: wait for every span
	// the checks below look at, from both members.
	spans, err := rcv.WaitFor(ctx, func(s []otlptest.Span) bool {
		tr := otlptest.Trace(s, traceID)
		return len(otlptest.Named(tr, "tooldispatch.deliver")) >= 2 &&
			len(otlptest.Named(tr, "tooldispatch.answer")) >= 1 && len(otlptest.Named(tr, "tooldispatch.confirm")) >= 1
	})
	spans = otlptest.Trace(spans, traceID)
	tree := otlptest.Tree(spans, "service.instance.id", "tooldispatch.request", "gen_ai.tool.call.id")
	if err != nil {
		t.Fatalf("the caller's trace never arrived whole: %v\n%s", err, tree)
	}
	t.Logf("an answer and a confirmation across two members:\n%s", tree)
	entryAddr, ownerAddr := fmt.Sprintf("127.0.0.1:%d", ports[2+entry]), fmt.Sprintf("127.0.0.1:%d", ports[2+owner])
	for _, name := range []string{"tooldispatch.answer", "tooldispatch.confirm"} {
		s := otlptest.Named(spans, name)
		if len(s) != 1 {
			t.Errorf("%d %s spans in the caller's trace, want 1", len(s), name)
			continue
		}
		if s[0].ParentID != parent || s[0].Resource["service.instance.id"] != entryAddr {
			t.Errorf("%s: parent %s on %s, want %s on %s", name, s[0].ParentID, s[0].Resource["service.instance.id"], parent, entryAddr)
		}
		var found bool
		for _, d := range otlptest.Named(spans, "tooldispatch.deliver") {
			if d.ParentID == s[0].SpanID {
				found = true
				if d.Resource["service.instance.id"] != ownerAddr {
					t.Errorf("the delivery of %s ran on %s, want the owner %s", name, d.Resource["service.instance.id"], ownerAddr)
				}
			}
		}
		if !found {
			t.Errorf("%s has no delivery span on the owner", name)
		}
	}
}
