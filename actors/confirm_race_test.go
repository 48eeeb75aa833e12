package actors

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// confirmWithin answers a confirmation and fails the test when no answer
// comes within a bound far above any real one: a confirmation that is
// lost waits for its request's whole timeout.
func confirmWithin(t *testing.T, d *Dispatcher, r *messages.ConfirmReply) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := d.Confirm(ctx, r)
	if err != nil {
		t.Fatalf("confirming %s: %v", r.CallId, err)
	}
	return ack.Status
}

// TestAnswerRightAfterTheTurnIsNeverLost: a person who approves a deferred
// call the moment its turn comes back, or who answers a call of a turn
// that has just ended, gets an answer at once. The session still counted
// the ended turn as running and forwarded the answer to it; a message that
// reaches a stopped actor's mailbox is dropped without a reply, and the
// answer waited for its whole timeout ("future: timeout").
func TestAnswerRightAfterTheTurnIsNeverLost(t *testing.T) {
	h := newHarness(t, nil)
	args := `{"path":"a.txt"}`
	parsed, err := toolkit.ParseArgs(args, toolkit.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	hash := parsed.Hash()
	runs := 200
	if testing.Short() {
		runs = 50
	}
	for i := range runs {
		id := fmt.Sprintf("w%d", i)
		tr := turn("s", "r", call(id, "write", args))
		tr.Approve, tr.Confirm = ApproveAsk, ConfirmDefer
		if got := statuses(h.dispatch(tr)); len(got) != 1 || got[0] != id+"=awaiting_approval" {
			t.Fatalf("turn %d: %v, want %s awaiting_approval", i, got, id)
		}
		// An answer to no call of any turn, then the real one, as fast as
		// a client can send them.
		if st := confirmWithin(t, h.d, &messages.ConfirmReply{Session: "s", CallId: "nobody-" + id, ArgsHash: hash, Approve: true}); st != confirmNotFound {
			t.Fatalf("turn %d: an answer to an unknown call = %q, want not_found", i, st)
		}
		if st := confirmWithin(t, h.d, &messages.ConfirmReply{Session: "s", CallId: id, ArgsHash: hash, Approve: true}); st != confirmAccepted {
			t.Fatalf("turn %d: the answer = %q, want accepted", i, st)
		}
		// The answered call's job has ended by the time a second answer
		// comes: already answered, at once, whichever job it reaches.
		if st := confirmWithin(t, h.d, &messages.ConfirmReply{Session: "s", CallId: id, ArgsHash: hash, Approve: true}); st != confirmAlreadyAnswered && st != confirmAccepted {
			t.Fatalf("turn %d: a second answer = %q", i, st)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && h.p.count(fmt.Sprintf("w%d", runs-1)) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	for i := range runs {
		if n := h.p.count(fmt.Sprintf("w%d", i)); n != 1 {
			t.Errorf("approved call w%d ran %d times, want once", i, n)
		}
	}
}
