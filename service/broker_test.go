package service

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/messages"
)

// ev makes an event of turn 1 of session with sequence number n.
func ev(session string, n uint64, kind, callID, tool string) *messages.Event {
	return &messages.Event{Kind: kind, Session: session, Run: "r1", Turn: 1, CallId: callID, Tool: tool,
		Seq: 1_000_000_000 + n, TimeUnixNano: time.Unix(1_800_000_000, int64(n)).UnixNano()}
}

// drain reads what is buffered on ch without blocking; closed reports
// whether ch was closed.
func drain(ch <-chan *messages.Event) (kinds []string, closed bool) {
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return kinds, true
			}
			kinds = append(kinds, e.Kind)
		default:
			return kinds, false
		}
	}
}

// TestBrokerSlowSubscriberDropped: Publish never blocks; a subscriber that
// does not read is dropped with a lagged notice and its channel closed,
// while the others keep getting events.
func TestBrokerSlowSubscriberDropped(t *testing.T) {
	b := NewBroker(BrokerOptions{SubscriberBuffer: 4})
	slow, cancelSlow := b.Subscribe("s", 0)
	defer cancelSlow()
	all, cancelAll := b.Subscribe("", 0)
	defer cancelAll()
	for n := uint64(1); n <= 10; n++ {
		b.Publish(ev("s", n, actors.EventToolCallText, "c1", "t"))
		if n%2 == 0 {
			drain(all) // a reader that keeps up
		}
	}
	kinds, closed := drain(slow)
	want := []string{"tool_call_text", "tool_call_text", "tool_call_text", EventLagged}
	if diff := cmp.Diff(want, kinds); diff != "" || !closed {
		t.Errorf("slow subscriber got (-want +got):\n%s closed=%v", diff, closed)
	}
	if _, closed := drain(all); closed {
		t.Error("the subscriber that kept up was dropped")
	}
	cancelSlow() // after the drop: harmless
}

// TestBrokerReplay: a subscriber that names the last event it saw gets
// the session's later events from the ring; a new one gets what is
// pending.
func TestBrokerReplay(t *testing.T) {
	b := NewBroker(BrokerOptions{ReplayEvents: 3})
	b.Publish(ev("s", 1, actors.EventToolCall, "c1", "edit_file"))
	confirm := ev("s", 2, actors.EventToolConfirm, "c1", "edit_file")
	confirm.ArgsHash = "h1"
	b.Publish(confirm)
	for n := uint64(3); n <= 6; n++ {
		b.Publish(ev("s", n, actors.EventToolCallText, "c0", "x"))
	}
	seqs := func(ch <-chan *messages.Event) []uint64 {
		var out []uint64
		for {
			select {
			case e := <-ch:
				out = append(out, e.Seq-1_000_000_000)
			default:
				return out
			}
		}
	}
	tests := []struct {
		name  string
		after uint64
		want  []uint64
	}{
		{"new subscriber: the pending confirmation", 0, []uint64{2}},
		{"after 4: the ring's later events", 1_000_000_004, []uint64{5, 6}},
		{"after 1: the pending confirmation and the ring (the rest fell out)", 1_000_000_001, []uint64{2, 4, 5, 6}},
		{"after the last: nothing", 1_000_000_006, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, cancel := b.Subscribe("s", tt.after)
			defer cancel()
			if diff := cmp.Diff(tt.want, seqs(ch)); diff != "" {
				t.Errorf("replayed seqs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBrokerPending: a tool_confirm adds a pending confirmation; the
// call's start, skip or result removes it. A running ask_user call is a
// pending question until it ends.
func TestBrokerPending(t *testing.T) {
	b := NewBroker(BrokerOptions{})
	confirm := func(n uint64, id string) {
		e := ev("s", n, actors.EventToolConfirm, id, "edit_file")
		e.ArgsHash, e.Arguments, e.Text = "hash-"+id, `{"path":"a"}`, "Allow?"
		b.Publish(e)
	}
	pendingIDs := func() []string {
		var ids []string
		for _, p := range b.Pending("") {
			ids = append(ids, p.CallID)
		}
		return ids
	}
	confirm(1, "c1")
	confirm(2, "c2")
	confirm(3, "c3")
	if diff := cmp.Diff([]string{"c1", "c2", "c3"}, pendingIDs()); diff != "" {
		t.Fatalf("pending (-want +got):\n%s", diff)
	}
	p, ok := b.PendingCall("s", "c2")
	want := PendingConfirm{Session: "s", Run: "r1", Turn: 1, CallID: "c2", Tool: "edit_file", Arguments: `{"path":"a"}`,
		ArgsHash: "hash-c2", Question: "Allow?", Since: time.Unix(1_800_000_000, 2).UTC(), seq: 1_000_000_002}
	if diff := cmp.Diff(want, p, cmp.AllowUnexported(PendingConfirm{})); !ok || diff != "" {
		t.Errorf("PendingCall (-want +got):\n%s", diff)
	}
	b.Publish(ev("s", 4, actors.EventToolCallStart, "c1", "edit_file"))
	b.Publish(ev("s", 5, actors.EventToolSkipped, "c2", "edit_file"))
	if diff := cmp.Diff([]string{"c3"}, pendingIDs()); diff != "" {
		t.Errorf("after start and skip (-want +got):\n%s", diff)
	}
	b.Publish(ev("s", 6, actors.EventToolResult, "c3", "edit_file"))
	if ids := pendingIDs(); len(ids) != 0 {
		t.Errorf("after the result: %v", ids)
	}

	call := ev("s", 7, actors.EventToolCall, "q1", askUserTool)
	call.Arguments = `{"question":"Which colour?"}`
	b.Publish(call)
	if q := b.Questions("s"); len(q) != 0 {
		t.Errorf("a question before the call started: %+v", q)
	}
	b.Publish(ev("s", 8, actors.EventToolCallStart, "q1", askUserTool))
	if q := b.Questions(""); len(q) != 1 || q[0].Question != "Which colour?" || q[0].CallID != "q1" {
		t.Errorf("questions: %+v", q)
	}
	b.Publish(ev("s", 9, actors.EventToolCallEnd, "q1", askUserTool))
	if q := b.Questions("s"); len(q) != 0 {
		t.Errorf("a question after the call ended: %+v", q)
	}
}

// TestBrokerRecentTurns: each session keeps a bounded summary of its
// recent turns, with each call's state and final status.
func TestBrokerRecentTurns(t *testing.T) {
	b := NewBroker(BrokerOptions{RecentTurns: 2})
	for turn := int64(1); turn <= 3; turn++ {
		for i, kind := range []string{actors.EventToolCall, actors.EventToolCallStart, actors.EventToolCallEnd, actors.EventToolResult} {
			e := ev("s", uint64(i+1), kind, fmt.Sprintf("c%d", turn), "calculate")
			e.Turn, e.Seq = turn, uint64(turn)*1_000_000_000+uint64(i+1)
			if kind == actors.EventToolResult || kind == actors.EventToolCallEnd {
				e.Status = "ok"
			}
			b.Publish(e)
		}
	}
	started := ev("s", 1, actors.EventToolCall, "c9", "edit_file")
	started.Turn, started.Seq = 4, 4_000_000_001
	b.Publish(started)
	got := b.Recent("s")
	var summary []string
	for _, tr := range got {
		for _, c := range tr.Calls {
			summary = append(summary, fmt.Sprintf("%d %s %s %s %s", tr.Turn, c.CallID, c.Tool, c.State, c.Status))
		}
	}
	want := []string{"3 c3 calculate done ok", "4 c9 edit_file checking "}
	if diff := cmp.Diff(want, summary); diff != "" {
		t.Errorf("recent turns (-want +got):\n%s", diff)
	}
}

// TestBrokerEviction: beyond MaxSessions the least recently active idle
// session is forgotten; a session with a subscriber is kept.
func TestBrokerEviction(t *testing.T) {
	b := NewBroker(BrokerOptions{MaxSessions: 2})
	_, cancel := b.Subscribe("watched", 0)
	defer cancel()
	b.Publish(ev("old", 1, actors.EventToolCall, "c1", "x"))
	b.Publish(ev("new", 1, actors.EventToolCall, "c1", "x"))
	if diff := cmp.Diff([]string{"new", "watched"}, b.Sessions()); diff != "" {
		t.Errorf("sessions (-want +got):\n%s", diff)
	}
}

// TestRequestSubscription: a turn's stream takes the events of its own
// request only, whatever other turns of its session publish meanwhile;
// after it lagged, a new subscription from its last event gets its
// request's events that the ring still holds, and only those.
func TestRequestSubscription(t *testing.T) {
	b := NewBroker(BrokerOptions{SubscriberBuffer: 4})
	of := func(n uint64, kind, callID, request string) *messages.Event {
		e := ev("s", n, kind, callID, "x")
		e.RequestId = request
		return e
	}
	ch, cancel := b.subscribeRequest("s", "req-a", 0)
	defer cancel()
	b.Publish(of(1, actors.EventToolCall, "a1", "req-a"))
	b.Publish(of(2, actors.EventToolCall, "b1", "req-b"))
	b.Publish(of(3, actors.EventToolConfirm, "a2", "req-a"))
	b.ConfirmAnswered("s", "a2")
	b.Publish(of(4, actors.EventConfirmDecided, "a2", "req-a"))
	b.Publish(of(5, actors.EventToolResult, "b1", "req-b"))
	var got []string
	for _, e := range drainEvents(ch) {
		got = append(got, e.GetKind()+":"+e.GetCallId())
	}
	want := []string{"tool_call:a1", "tool_confirm:a2", EventConfirmDecided + ":a2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request a's events (-want +got):\n%s", diff)
	}

	// Fall behind: the lagged notice, then resume from the last event seen.
	lagging, stop := b.subscribeRequest("s", "req-a", 0)
	defer stop()
	for n := uint64(10); n < 20; n++ {
		b.Publish(of(n, actors.EventToolCallText, "a1", "req-a"))
		b.Publish(of(n+100, actors.EventToolCallText, "b1", "req-b"))
	}
	evs := drainEvents(lagging)
	if len(evs) == 0 || evs[len(evs)-1].GetKind() != EventLagged {
		t.Fatalf("no lagged notice: %v", evs)
	}
	last := evs[len(evs)-2].GetSeq()
	resumed, stopResumed := b.subscribeRequest("s", "req-a", last)
	defer stopResumed()
	got = got[:0]
	for _, e := range drainEvents(resumed) {
		got = append(got, fmt.Sprintf("%s:%d", e.GetRequestId(), e.GetSeq()-1_000_000_000))
	}
	want = nil
	for n := evs[len(evs)-2].GetSeq() - 1_000_000_000 + 1; n < 20; n++ {
		want = append(want, fmt.Sprintf("req-a:%d", n))
	}
	if len(want) == 0 {
		t.Fatal("nothing left to resume")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resumed (-want +got):\n%s", diff)
	}
}

// drainEvents returns what is buffered on ch without blocking.
func drainEvents(ch <-chan *messages.Event) []*messages.Event {
	var out []*messages.Event
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, e)
		default:
			return out
		}
	}
}
