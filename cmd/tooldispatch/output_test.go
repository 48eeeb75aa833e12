package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/messages"
)

func TestEventLine(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 890, time.UTC)
	tests := []struct {
		name string
		ev   *messages.Event
		want string
	}{
		{
			name: "required fields only",
			ev: &messages.Event{Kind: "tool_call_start", Session: "s", Run: "r", Turn: 2, CallId: "c1", Tool: "read_files",
				Seq: 2000000003, TimeUnixNano: at.UnixNano()},
			want: `{"event":"tool_call_start","session":"s","run":"r","turn":2,"call_id":"c1","tool":"read_files","seq":2000000003,"time":"2025-03-04T05:06:07.00000089Z"}`,
		},
		{
			name: "optional fields",
			ev: &messages.Event{Kind: "tool_confirm", Session: "s", Run: "r", Turn: 1, CallId: "c2", Tool: "edit_file", Seq: 7,
				TimeUnixNano: at.UnixNano(), Text: "Allow <edit_file> & go?", Status: "ok", ArgsHash: "ab12",
				Arguments: `{"path":"a.txt"}`, Injected: "timeout"},
			want: `{"event":"tool_confirm","session":"s","run":"r","turn":1,"call_id":"c2","tool":"edit_file","seq":7,"time":"2025-03-04T05:06:07.00000089Z",` +
				`"text":"Allow <edit_file> & go?","status":"ok","args_hash":"ab12","arguments":"{\"path\":\"a.txt\"}","injected":"timeout"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(marshalLine(eventJSON(tt.ev)))
			if diff := cmp.Diff(tt.want+"\n", got); diff != "" {
				t.Errorf("event line (-want +got):\n%s", diff)
			}
		})
	}
}

func TestToolMessageLine(t *testing.T) {
	tests := []struct {
		name string
		msg  *messages.ToolMessage
		want string
	}{
		{
			name: "ok",
			msg:  &messages.ToolMessage{Role: "tool", ToolCallId: "c1", Name: "read_files", Status: "ok", Content: "a < b\n"},
			want: `{"role":"tool","tool_call_id":"c1","name":"read_files","status":"ok","content":"a < b\n"}`,
		},
		{
			name: "role filled in, empty content kept, injected shown",
			msg:  &messages.ToolMessage{ToolCallId: "c2", Name: "x", Status: "error", Injected: "error"},
			want: `{"role":"tool","tool_call_id":"c2","name":"x","status":"error","content":"","injected":"error"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want+"\n", string(marshalLine(toolJSON(tt.msg)))); diff != "" {
				t.Errorf("tool line (-want +got):\n%s", diff)
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer safe for the output's goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestOutputKeepsOrderUnderConcurrentProducers(t *testing.T) {
	var buf lockedBuffer
	out := newOutputFor(&buf, false)
	const producers, perProducer = 8, 200
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range perProducer {
				out.Event(&messages.Event{Kind: "tool_call_text", CallId: fmt.Sprint(p), Seq: uint64(i)})
			}
		})
	}
	wg.Wait()
	out.TurnReply(0, nil, []*messages.ToolMessage{{ToolCallId: "a", Status: "ok"}, {ToolCallId: "b", Status: "deduped"}}, messages.ShapeOpenAI)
	if err := out.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	out.TurnReply(0, nil, []*messages.ToolMessage{{ToolCallId: "late"}}, messages.ShapeOpenAI) // dropped after Close

	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != producers*perProducer+2 {
		t.Fatalf("got %d lines, want %d", len(lines), producers*perProducer+2)
	}
	next := map[string]uint64{}
	for _, l := range lines[:len(lines)-2] {
		var ev eventLine
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if ev.Seq != next[ev.CallID] {
			t.Fatalf("producer %s: seq %d, want %d", ev.CallID, ev.Seq, next[ev.CallID])
		}
		next[ev.CallID]++
	}
	var got []string
	for _, l := range lines[len(lines)-2:] {
		var m toolMessageJSON
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, m.ToolCallID+":"+m.Status)
	}
	if diff := cmp.Diff([]string{"a:ok", "b:deduped"}, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestOutputReportsWriteErrors(t *testing.T) {
	out := newOutputFor(failingWriter{}, false)
	out.TurnReply(0, nil, []*messages.ToolMessage{{ToolCallId: "a"}}, messages.ShapeOpenAI)
	if err := out.Close(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Close = %v, want the write error", err)
	}
	if out.Err() == nil {
		t.Error("Err = nil after a failed write")
	}
}

func TestSessionOutput(t *testing.T) {
	turns := []*messages.TurnRecord{{
		Turn: 1,
		Assistant: &messages.AssistantMessage{Role: "assistant", Content: "x", ToolCalls: []*messages.ToolCall{
			{Id: "c1", Type: "function", Function: &messages.FunctionCall{Name: "calculate", Arguments: `{"expression":"1+1"}`}},
		}},
		ToolMessages: []*messages.ToolMessage{{Role: "tool", ToolCallId: "c1", Name: "calculate", Status: "ok", Content: "2"}},
	}}
	out := sessionOutput{Tools: []toolMessageJSON{}, ToolHistories: []any{}}
	fillSession(&out, turns)
	var b bytes.Buffer
	if err := writeJSON(&b, out); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%s: %v", b.String(), err)
	}
	want := map[string]any{
		"tools": []any{
			map[string]any{"role": "tool", "tool_call_id": "c1", "name": "calculate", "status": "ok", "content": "2"},
		},
		"tool_histories": []any{
			map[string]any{"role": "assistant", "content": "x", "tool_calls": []any{
				map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "calculate", "arguments": `{"expression":"1+1"}`}},
			}},
			map[string]any{"role": "tool", "tool_call_id": "c1", "name": "calculate", "status": "ok", "content": "2"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("session (-want +got):\n%s", diff)
	}
}
