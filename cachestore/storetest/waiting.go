package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// askedBase is the time the approvals of these cases were asked, plus
// their index.
var askedBase = time.Unix(1_700_000_000, 0).UTC()

// DeferredTurn is a committed turn of n calls, every one awaiting
// approval with its approval record: call i of tool tools[i%len(tools)],
// asked at asked+i ms, with a diff of diffBytes.
func DeferredTurn(session, run string, turn int64, n int, asked time.Time, diffBytes int, tools ...string) *cachestore.TurnCommit {
	if len(tools) == 0 {
		tools = []string{"edit_file"}
	}
	rec := Record(turn, run, fmt.Sprintf("tid-%s-%d", session, turn), n)
	c := &cachestore.TurnCommit{Session: session, Record: rec}
	for i, m := range rec.ToolMessages {
		tool := tools[i%len(tools)]
		m.Name, m.Status, m.Content = tool, cachestore.StatusAwaitingApproval, "waiting for a person's approval"
		args := fmt.Sprintf(`{"path":"f%d.txt","content":"x"}`, i)
		c.Approvals = append(c.Approvals, &cachestore.Approval{
			Session: session, Run: run, Turn: turn, CallID: m.ToolCallId, Tool: tool,
			Arguments: []byte(args), ArgsHash: "hash-" + m.ToolCallId, State: strings.Repeat("s", 100), Shown: args,
			Diff: strings.Repeat("+", diffBytes), Note: "note", Ceiling: "ask", Answerer: "confirm",
			Asked: asked.Add(time.Duration(i) * time.Millisecond),
		})
	}
	return c
}

// ListAll lists the whole index a page of limit at a time, failing the
// test on an error; it returns the items in order and the pages read.
func ListAll(t testing.TB, s cachestore.WaitingIndex, q cachestore.WaitingQuery) ([]*cachestore.Waiting, int) {
	t.Helper()
	var out []*cachestore.Waiting
	pages := 0
	for {
		p, err := s.ListWaiting(context.Background(), q)
		if err != nil {
			t.Fatalf("ListWaiting(%+v): %v", q, err)
		}
		pages++
		out = append(out, p.Items...)
		if p.Next == nil {
			return out, pages
		}
		if pages > 100_000 {
			t.Fatalf("ListWaiting never ends")
		}
		q.After = p.Next
	}
}

func callIDs(ws []*cachestore.Waiting) string {
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.Session + "/" + w.CallID
	}
	return strings.Join(ids, " ")
}

// testWaitingIndex: every approval committed is listed by the index with
// what a person is shown of it (its turn's id, not its canonical
// arguments or bound state), in the order it was asked, across a restart;
// each filter keeps what it names; a claimed approval is not listed and a
// settled one is gone.
func testWaitingIndex(t *testing.T, open Opener) {
	s, restart := open(t)
	ctx := context.Background()
	for _, c := range []*cachestore.TurnCommit{
		DeferredTurn("b", "r1", 1, 3, askedBase, 10, "edit_file", "run_command"),
		DeferredTurn("a", "r2", 1, 2, askedBase.Add(time.Second), 10),
		DeferredTurn("b", "r2", 2, 1, askedBase.Add(time.Millisecond), 10, "run_command"), // same time as b's second call
	} {
		if err := s.CommitTurn(ctx, c); err != nil {
			t.Fatalf("CommitTurn: %v", err)
		}
	}
	s = restart()
	all, pages := ListAll(t, s, cachestore.WaitingQuery{})
	want := "b/call_1_0 b/call_1_1 b/call_2_0 b/call_1_2 a/call_1_0 a/call_1_1"
	if got := callIDs(all); got != want || pages != 1 {
		t.Fatalf("the index lists %s in %d pages, want %s in 1", got, pages, want)
	}
	w := all[0]
	if w.Run != "r1" || w.Turn != 1 || w.TurnID != "tid-b-1" || w.Tool != "edit_file" || w.ArgsHash != "hash-call_1_0" ||
		w.Shown != `{"path":"f0.txt","content":"x"}` || w.Diff != "++++++++++" || w.Note != "note" || w.Ceiling != "ask" ||
		!w.Asked.Equal(askedBase) || w.Claimed {
		t.Errorf("the first entry = %+v, want b's first call as committed", w)
	}
	for _, tc := range []struct {
		q    cachestore.WaitingQuery
		want string
	}{
		{cachestore.WaitingQuery{Session: "a"}, "a/call_1_0 a/call_1_1"},
		{cachestore.WaitingQuery{Run: "r2"}, "b/call_2_0 a/call_1_0 a/call_1_1"},
		{cachestore.WaitingQuery{Tool: "run_command"}, "b/call_1_1 b/call_2_0"},
		{cachestore.WaitingQuery{Session: "b", Run: "r1", Tool: "edit_file"}, "b/call_1_0 b/call_1_2"},
		{cachestore.WaitingQuery{CallID: "call_1_1"}, "b/call_1_1 a/call_1_1"},
		{cachestore.WaitingQuery{Before: askedBase.Add(2 * time.Millisecond)}, "b/call_1_0 b/call_1_1 b/call_2_0"},
		{cachestore.WaitingQuery{Before: askedBase}, ""},
		{cachestore.WaitingQuery{Session: "nobody"}, ""},
		{cachestore.WaitingQuery{Session: "a", Tool: "run_command"}, ""},
	} {
		got, _ := ListAll(t, s, tc.q)
		if callIDs(got) != tc.want {
			t.Errorf("ListWaiting(%+v) = %s, want %s", tc.q, callIDs(got), tc.want)
		}
	}

	LoadSession(t, s, "b")
	if _, err := s.ClaimApproval(ctx, "b", "call_1_1", "hash-call_1_1"); err != nil {
		t.Fatalf("ClaimApproval: %v", err)
	}
	m := &messages.ToolMessage{Role: "tool", ToolCallId: "call_1_0", Status: "skipped", Content: "denied"}
	if _, err := s.SettleApproval(ctx, "b", "call_1_0", m); err != nil {
		t.Fatalf("SettleApproval: %v", err)
	}
	got, _ := ListAll(t, s, cachestore.WaitingQuery{})
	if want := "b/call_2_0 b/call_1_2 a/call_1_0 a/call_1_1"; callIDs(got) != want {
		t.Errorf("after a claim and a settlement the index lists %s, want %s", callIDs(got), want)
	}
	rec, err := s.TurnByNumber(ctx, "b", 2)
	if err != nil || rec.GetTurn() != 2 || rec.GetTurnId() != "tid-b-2" {
		t.Errorf("TurnByNumber(b, 2) = turn %d %q, %v", rec.GetTurn(), rec.GetTurnId(), err)
	}
	if _, err := s.TurnByNumber(ctx, "b", 3); !errors.Is(err, cachestore.ErrNotFound) {
		t.Errorf("TurnByNumber of a turn not committed = %v, want ErrNotFound", err)
	}
}

// testWaitingPaging: a listing read a page at a time gives every entry
// once, in order, whatever comes and goes between its pages: entries
// added after the place reached come in later pages, entries settled are
// not given, and no entry present throughout is missed or given twice.
func testWaitingPaging(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	const sessions, perTurn = 6, 5
	for i := range sessions {
		c := DeferredTurn(fmt.Sprintf("s%d", i), "r", 1, perTurn, askedBase.Add(time.Duration(i)*time.Second), 0)
		if err := s.CommitTurn(ctx, c); err != nil {
			t.Fatalf("CommitTurn: %v", err)
		}
		LoadSession(t, s, fmt.Sprintf("s%d", i))
	}
	q := cachestore.WaitingQuery{Limit: 4}
	seen := map[string]int{}
	var order []*cachestore.Waiting
	settled := map[string]bool{}
	for page := 0; ; page++ {
		p, err := s.ListWaiting(ctx, q)
		if err != nil {
			t.Fatalf("ListWaiting: %v", err)
		}
		if len(p.Items) > 4 {
			t.Fatalf("a page of limit 4 has %d items", len(p.Items))
		}
		for _, w := range p.Items {
			seen[w.Session+"/"+w.CallID]++
			order = append(order, w)
		}
		switch page {
		case 1: // an entry of a later session goes, one of a new session comes
			m := &messages.ToolMessage{Role: "tool", ToolCallId: "call_1_3", Status: "skipped", Content: "denied"}
			if _, err := s.SettleApproval(ctx, "s4", "call_1_3", m); err != nil {
				t.Fatalf("SettleApproval: %v", err)
			}
			settled["s4/call_1_3"] = true
			if err := s.CommitTurn(ctx, DeferredTurn("late", "r", 1, 2, askedBase.Add(time.Hour), 0)); err != nil {
				t.Fatalf("CommitTurn: %v", err)
			}
		case 2: // one already given goes
			m := &messages.ToolMessage{Role: "tool", ToolCallId: "call_1_0", Status: "skipped", Content: "denied"}
			if _, err := s.SettleApproval(ctx, "s0", "call_1_0", m); err != nil {
				t.Fatalf("SettleApproval: %v", err)
			}
		}
		if p.Next == nil {
			break
		}
		q.After = p.Next
	}
	for i := 1; i < len(order); i++ {
		if order[i-1].Pos().Compare(order[i].Pos()) >= 0 {
			t.Errorf("the pages give %s/%s before %s/%s", order[i-1].Session, order[i-1].CallID, order[i].Session, order[i].CallID)
		}
	}
	for i := range sessions {
		for c := range perTurn {
			k := fmt.Sprintf("s%d/call_1_%d", i, c)
			if want := map[bool]int{true: 0, false: 1}[settled[k]]; seen[k] != want {
				t.Errorf("%s was given %d times, want %d", k, seen[k], want)
			}
		}
	}
	if seen["late/call_1_0"] != 1 || seen["late/call_1_1"] != 1 {
		t.Errorf("entries added after the place the pages reached were given %d and %d times, want once each",
			seen["late/call_1_0"], seen["late/call_1_1"])
	}
}

// testWaitingBounds: a listing never holds more than its bounds, whatever
// it is asked: at most MaxWaitingLimit items, at most MaxScan entries
// examined or returned (a filter matching few gives a short page and
// where to go on),
// items up to MaxBytes (at least one); an approval's preview is kept in
// the index at most at its bound.
func testWaitingBounds(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	for i := range 12 {
		// 60 calls each, of two tools, under the dispatcher's 64 a session.
		c := DeferredTurn(fmt.Sprintf("s%02d", i), "r", 1, 60, askedBase.Add(time.Duration(i)*time.Minute), 0, "edit_file", "edit_file", "run_command")
		if err := s.CommitTurn(ctx, c); err != nil {
			t.Fatalf("CommitTurn: %v", err)
		}
	}
	p, err := s.ListWaiting(ctx, cachestore.WaitingQuery{Limit: 1 << 30})
	if err != nil || len(p.Items) != cachestore.MaxWaitingLimit || p.Next == nil {
		t.Fatalf("a huge limit gave %d items (next %v), %v; want %d and more to come", len(p.Items), p.Next, err, cachestore.MaxWaitingLimit)
	}
	// A store that reads its entries one by one examines at most 30 (10
	// of them match); one whose database applies the filter returns at
	// most 30 that match.
	p, err = s.ListWaiting(ctx, cachestore.WaitingQuery{Tool: "run_command", MaxScan: 30})
	if err != nil || len(p.Items) == 0 || len(p.Items) > 30 || p.Next == nil {
		t.Fatalf("a scan of 30 with a filter matching a third gave %d items (next %v), %v; want 10 to 30 and more to come",
			len(p.Items), p.Next, err)
	}
	for _, w := range p.Items {
		if w.Tool != "run_command" {
			t.Fatalf("a listing of run_command gave a call of %s", w.Tool)
		}
	}
	all, _ := ListAll(t, s, cachestore.WaitingQuery{Tool: "run_command", MaxScan: 30})
	if len(all) != 240 {
		t.Errorf("paging a filtered listing by scans of 30 gave %d items, want 240", len(all))
	}

	big := DeferredTurn("big", "r", 1, 4, askedBase.Add(-time.Hour), 2*cachestore.MaxWaitingDiff)
	big.Approvals[0].Shown = strings.Repeat("é", cachestore.MaxWaitingShown)
	if err := s.CommitTurn(ctx, big); err != nil {
		t.Fatalf("CommitTurn: %v", err)
	}
	p, err = s.ListWaiting(ctx, cachestore.WaitingQuery{Session: "big", MaxBytes: 100 << 10})
	if err != nil || len(p.Items) != 2 || p.Next == nil {
		t.Fatalf("a listing of 100 KiB over entries of 64 KiB gave %d items (next %v), %v; want 2 and more", len(p.Items), p.Next, err)
	}
	w := p.Items[0]
	if len(w.Diff) > cachestore.MaxWaitingDiff || len(w.Shown) > cachestore.MaxWaitingShown || !strings.HasSuffix(w.Diff, "…") {
		t.Errorf("an entry keeps %d bytes of diff and %d of arguments, want at most %d and %d, cut with a mark",
			len(w.Diff), len(w.Shown), cachestore.MaxWaitingDiff, cachestore.MaxWaitingShown)
	}
}

// testWaitingCap: a commit whose approvals would take the store past its
// MaxWaiting fails whole (ErrWaitingCap, how many wait and the cap) and
// writes nothing: the same turn commits afterwards without them; a
// commit without approvals never fails for it; a settled approval makes
// room; concurrent sessions together never pass it.
func testWaitingCap(t *testing.T, open Opener) {
	s, restart := open(t)
	ctx := context.Background()
	c := DeferredTurn("a", "r", 1, 3, askedBase, 0)
	c.MaxWaiting = 4
	if err := s.CommitTurn(ctx, c); err != nil {
		t.Fatalf("CommitTurn under the cap: %v", err)
	}
	s = restart()
	over := DeferredTurn("b", "r", 1, 2, askedBase, 0)
	over.MaxWaiting = 4
	err := s.CommitTurn(ctx, over)
	var capErr *cachestore.WaitingCapError
	if !errors.Is(err, cachestore.ErrWaitingCap) || !errors.As(err, &capErr) || capErr.Waiting != 3 || capErr.Cap != 4 || capErr.Room() != 1 {
		t.Fatalf("CommitTurn past the cap = %v, want a WaitingCapError of 3 waiting, cap 4", err)
	}
	if got := Turns(t, s, "b"); len(got) != 0 {
		t.Errorf("the refused commit wrote %d turns", len(got))
	}
	if got, _ := ListAll(t, s, cachestore.WaitingQuery{}); len(got) != 3 {
		t.Errorf("after the refused commit %d approvals wait, want 3", len(got))
	}
	plain := &cachestore.TurnCommit{Session: "b", Record: Record(1, "r", "", 2), MaxWaiting: 3}
	if err := s.CommitTurn(ctx, plain); err != nil {
		t.Fatalf("a commit without approvals at the cap: %v", err)
	}
	LoadSession(t, s, "a")
	m := &messages.ToolMessage{Role: "tool", ToolCallId: "call_1_0", Status: "skipped", Content: "denied"}
	if _, err := s.SettleApproval(ctx, "a", "call_1_0", m); err != nil {
		t.Fatalf("SettleApproval: %v", err)
	}
	next := DeferredTurn("b", "r", 2, 1, askedBase, 0)
	next.MaxWaiting = 3
	if err := s.CommitTurn(ctx, next); err != nil {
		t.Fatalf("CommitTurn into the room a settlement made: %v", err)
	}

	// 16 sessions race for the 7 places left under a cap of 10.
	var wg sync.WaitGroup
	var mu sync.Mutex
	committed, refused := 0, 0
	for i := range 16 {
		wg.Go(func() {
			c := DeferredTurn(fmt.Sprintf("race%d", i), "r", 1, 1, askedBase, 0)
			c.MaxWaiting = 10
			err := s.CommitTurn(ctx, c)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				committed++
			case errors.Is(err, cachestore.ErrWaitingCap):
				refused++
			default:
				t.Errorf("CommitTurn: %v", err)
			}
		})
	}
	wg.Wait()
	got, _ := ListAll(t, s, cachestore.WaitingQuery{})
	if committed != 7 || refused != 9 || len(got) != 10 {
		t.Errorf("16 sessions under a cap of 10 with 3 waiting: %d committed, %d refused, %d wait; want 7, 9, 10",
			committed, refused, len(got))
	}
}
