package service

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/integration_test/chaos"
)

// TestTurnIDIsAnIdempotencyKey: a turn_id already committed replays the
// committed result when the calls are the same (whatever their JSON
// spacing), and is refused with 409 when they differ: nothing runs, and the
// message names the turn id.
func TestTurnIDIsAnIdempotencyKey(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	edit := func(content string) map[string]any {
		tr := turn("r1", "all", call(t, "e1", "edit_file", map[string]string{"path": "out.txt", "content": content}))
		tr["turn_id"] = "tid-7"
		return tr
	}
	first := f.postTurn("s1", edit("first\n"))
	if len(first.Messages) != 1 || first.Messages[0].Status != "ok" || first.Replayed {
		t.Fatalf("first turn: %+v", first)
	}

	// Same calls, arguments spelled differently: replay.
	same := edit("first\n")
	same["message"].(map[string]any)["tool_calls"].([]map[string]any)[0]["function"].(map[string]any)["arguments"] =
		`{ "content": "first\n",  "path": "out.txt" }`
	again := f.postTurn("s1", same)
	if !again.Replayed || again.Turn != first.Turn {
		t.Errorf("same calls again: replayed %v turn %d, want a replay of turn %d", again.Replayed, again.Turn, first.Turn)
	}

	// Different calls: refused, nothing runs.
	resp, body := f.do("POST", "/v1/sessions/s1/turns", edit("second\n"))
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("different calls under a committed turn_id: %d %s, want 409", resp.StatusCode, body)
	}
	if !strings.Contains(string(body), "tid-7") || strings.Contains(string(body), `"messages"`) {
		t.Errorf("409 body does not name the turn id, or carries messages: %s", body)
	}
	b, err := os.ReadFile(filepath.Join(f.dir, "out.txt"))
	if err != nil || string(b) != "first\n" {
		t.Errorf("out.txt = %q, %v; the refused turn ran", b, err)
	}
	// The session holds only the first turn.
	resp, body = f.do("GET", "/v1/sessions/s1", nil)
	var sess struct {
		Tools []toolMessage `json:"tools"`
	}
	mustUnmarshal(t, body, &sess)
	if resp.StatusCode != http.StatusOK || len(sess.Tools) != 1 {
		t.Errorf("session after the refusal: %d %s", resp.StatusCode, body)
	}
}

// TestStoreFailureAnswers5xxWithoutResults: a turn that cannot be committed
// answers 500 with the error and none of the turn's results, plain and
// streamed.
func TestStoreFailureAnswers5xxWithoutResults(t *testing.T) {
	f := newFixture(t, fixtureOpts{wrapStore: func(s cachestore.Store) cachestore.Store {
		fs := chaos.NewFaultStore(s)
		fs.FailCommits.Store(true)
		return fs
	}})
	tr := turn("r1", "none", call(t, "c1", "calculate", map[string]string{"expression": "6*7"}))
	resp, body := f.do("POST", "/v1/sessions/s1/turns", tr)
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("status %d, want 500: %s", resp.StatusCode, body)
	}
	if strings.Contains(string(body), `"messages"`) || strings.Contains(string(body), "42") {
		t.Errorf("the failure carries results that were not committed: %s", body)
	}
	if !strings.Contains(string(body), "injected store write failure") {
		t.Errorf("the failure does not say what failed: %s", body)
	}

	sse := f.openSSE("POST", "/v1/sessions/s2/turns", tr, "")
	defer sse.close()
	for {
		ev := sse.must()
		if ev.Event == eventResult || ev.Event == eventError {
			if ev.Event != eventError || strings.Contains(ev.Data, `"messages"`) {
				t.Errorf("streamed end: %s %s, want an error event without messages", ev.Event, ev.Data)
			}
			break
		}
		if strings.Contains(ev.Data, "tool_result") {
			t.Errorf("streamed a tool_result of a turn that was not committed: %s", ev.Data)
		}
	}
}
