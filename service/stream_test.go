package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// perCallOrder is the order of one call's events (SPEC section 7), the
// kinds written one letter each: tool_call, tool_call_start,
// tool_call_text*, exec_error?, tool_call_end, tool_result.
var perCallOrder = regexp.MustCompile(`^CST*X?ER$`)

var kindLetter = map[string]string{
	"tool_call": "C", "tool_call_start": "S", "tool_call_text": "T", "exec_error": "X",
	"tool_call_end": "E", "tool_result": "R",
}

// TestTurnEventStream posts a turn with Accept: text/event-stream: its
// events arrive in the order of SPEC section 7 for each call, results in
// call order after every call ended, and the last event is the result.
func TestTurnEventStream(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	const s = "stream-s"
	stream := f.openSSE("POST", "/v1/sessions/"+s+"/turns", turn("r1", "all",
		call(t, "c1", "calculate", map[string]any{"expression": "2 ** 10"}),
		call(t, "c2", "read_files", map[string]any{"paths": []string{"notes.md"}}),
		call(t, "c3", "run_command", map[string]any{"argv": []string{"echo", "streamed"}}),
		call(t, "c4", "edit_file", map[string]any{"path": "out.txt", "content": "x"}),
		call(t, "c5", "read_files", map[string]any{"paths": []string{"missing.txt"}}),
	), "")

	var evs []eventData
	var result sseEvent
	var lastSeq uint64
	for {
		ev, err := stream.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Event == eventResult || ev.Event == eventError {
			result = ev
			continue
		}
		if result.Event != "" {
			t.Fatalf("event %s after the result", ev.Event)
		}
		var d eventData
		ev.decode(t, &d)
		if ev.ID != strconv.FormatUint(d.Seq, 10) || d.Seq <= lastSeq {
			t.Fatalf("event id %q, seq %d after %d: ids must be the increasing sequence numbers", ev.ID, d.Seq, lastSeq)
		}
		if d.Event != ev.Event || d.Session != s || d.Turn != 1 {
			t.Fatalf("event %s data %+v", ev.Event, d)
		}
		lastSeq = d.Seq
		evs = append(evs, d)
	}
	if result.Event != eventResult {
		t.Fatalf("the stream ended with %q, want a result event", result.Event)
	}
	var reply turnReply
	result.decode(t, &reply)
	if diff := cmp.Diff([]string{"ok", "ok", "ok", "ok", "error"}, statuses(reply.Messages)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}

	perCall := map[string]string{}
	var results []string
	lastEnd, firstResult := -1, len(evs)
	for i, d := range evs {
		perCall[d.CallID] += kindLetter[d.Event]
		switch d.Event {
		case "tool_call_end":
			lastEnd = i
		case "tool_result":
			firstResult = min(firstResult, i)
			results = append(results, d.CallID)
		}
	}
	for _, id := range []string{"c1", "c2", "c3", "c4", "c5"} {
		if !perCallOrder.MatchString(perCall[id]) {
			t.Errorf("events of %s: %s, want %s", id, perCall[id], perCallOrder)
		}
	}
	if !strings.Contains(perCall["c3"], "T") {
		t.Errorf("run_command streamed no output: %s", perCall["c3"])
	}
	if diff := cmp.Diff([]string{"c1", "c2", "c3", "c4", "c5"}, results); diff != "" {
		t.Errorf("tool_result order (-want +got):\n%s", diff)
	}
	if lastEnd > firstResult {
		t.Errorf("a tool_call_end (event %d) came after the first tool_result (event %d)", lastEnd, firstResult)
	}
}

// TestSessionEventsResume: a client that reconnects with Last-Event-ID gets
// the events it missed, and only those.
func TestSessionEventsResume(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	const s = "resume-s"
	f.postTurn(s, turn("r1", "all",
		call(t, "c1", "calculate", map[string]any{"expression": "1 + 1"}),
		call(t, "c2", "calculate", map[string]any{"expression": "2 + 2"})))

	all := f.broker.Recent(s)
	if len(all) != 1 || len(all[0].Calls) != 2 {
		t.Fatalf("recent turns: %+v", all)
	}
	// Resume after the second event of the turn.
	resumeAfter := uint64(1)*1_000_000_000 + 2
	stream := f.openSSE("GET", "/v1/sessions/"+s+"/events", nil, strconv.FormatUint(resumeAfter, 10))
	var got []string
	want := resumeAfter + 1
	for len(got) == 0 || got[len(got)-1] != "tool_result c2" {
		ev := stream.must()
		var d eventData
		ev.decode(t, &d)
		if d.Seq != want {
			t.Fatalf("replayed seq %d, want %d (every event after %d, in order)", d.Seq, want, resumeAfter)
		}
		want++
		got = append(got, fmt.Sprintf("%s %s", d.Event, d.CallID))
	}
	if n := strings.Count(strings.Join(got, ","), "tool_result"); n != 2 {
		t.Errorf("replay has %d tool_result events, want 2: %v", n, got)
	}

	resp, body := f.request(t.Context(), "GET", "/v1/sessions/"+s+"/events", nil, http.Header{"Last-Event-ID": {"abc"}})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("Last-Event-ID abc: %d %s", resp.StatusCode, body)
	}
}

// TestConcurrentStreamsOfOneSession: two streamed turns of one session
// posted while the first runs are run one after the other, in the order
// the session received them, and each stream carries the events of its own
// turn only.
func TestConcurrentStreamsOfOneSession(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	hold := toolkit.Tool{Name: "hold", Description: "Waits until released.", Concurrent: true, ReadOnly: true, NoDedup: true,
		Schema: json.RawMessage(`{"type":"object"}`),
		Handler: func(ctx context.Context, _ *toolkit.Call) (toolkit.Result, error) {
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return toolkit.Result{Content: "held"}, nil
		}}
	f := newFixture(t, fixtureOpts{tools: []toolkit.Tool{hold}})
	const s = "two-streams"
	first := f.openSSE("POST", "/v1/sessions/"+s+"/turns", turn("r1", "all", call(t, "a1", "hold", map[string]any{})), "")
	select {
	case <-entered:
	case <-time.After(testTimeout):
		t.Fatal("the first turn's call did not start")
	}
	second := f.openSSE("POST", "/v1/sessions/"+s+"/turns", turn("r1", "all",
		call(t, "b1", "calculate", map[string]any{"expression": "1+1"}), call(t, "b2", "hold", map[string]any{})), "")
	close(release)

	read := func(c *sseClient) (turns []int64, calls []string, reply turnReply) {
		for {
			ev, err := c.next()
			if err == io.EOF {
				return turns, calls, reply
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.Event == eventResult {
				ev.decode(t, &reply)
				continue
			}
			var d eventData
			ev.decode(t, &d)
			turns, calls = append(turns, d.Turn), append(calls, d.CallID)
		}
	}
	turnsA, callsA, replyA := read(first)
	turnsB, callsB, replyB := read(second)
	if replyA.Turn != 1 || replyB.Turn != 2 {
		t.Fatalf("turn numbers %d and %d, want 1 and 2 (arrival order)", replyA.Turn, replyB.Turn)
	}
	for i, id := range callsA {
		if id != "a1" || turnsA[i] != 1 {
			t.Errorf("the first stream carries an event of call %q of turn %d", id, turnsA[i])
		}
	}
	for i, id := range callsB {
		if (id != "b1" && id != "b2") || turnsB[i] != 2 {
			t.Errorf("the second stream carries an event of call %q of turn %d", id, turnsB[i])
		}
	}
	if len(callsA) == 0 || len(callsB) == 0 {
		t.Fatalf("events: first %v, second %v", callsA, callsB)
	}
}
