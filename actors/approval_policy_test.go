package actors

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/messages"
)

// openDeferNodeUnder is openDeferNode with the operator's ceiling and
// exclusions of the process that opens the store.
func openDeferNodeUnder(t *testing.T, dir, maxApprove string, exclude []string) *deferNode {
	t.Helper()
	s, err := badger.Open(badger.TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	n := &deferNode{store: s, p: newProbe(), result: make(chan *messages.Event, 16)}
	d, err := New(Config{Registry: testRegistry(n.p), Store: s, MaxConcurrency: 3, WatchdogGrace: 20 * time.Millisecond,
		MaxApprove: maxApprove, Exclude: exclude,
		Events: func(e *messages.Event) {
			if e.Kind == EventToolResult {
				n.result <- e
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	n.d = d
	return n
}

// TestDeferredApprovalUnderALoweredPolicy: a deferred approval outlives
// the process that asked it; when the operator restarts with a lower
// ceiling (none) or excludes the tool, an approving answer does not run
// the call (it is settled skipped, naming why), as a turn asking it now
// could not run it either.
func TestDeferredApprovalUnderALoweredPolicy(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxApprove string
		exclude    []string
		want       string
	}{
		{"ceiling none", ApproveNone, nil, "does not allow calls that change things"},
		{"tool excluded", "", []string{"write"}, "excluded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			n := openDeferNode(t, dir)
			if _, err := n.d.Dispatch(context.Background(), deferTurn(call("c2", "write", `{"path":"a.txt"}`))); err != nil {
				t.Fatal(err)
			}
			as, err := n.store.Approvals(context.Background(), "s")
			if err != nil || len(as) != 1 {
				t.Fatalf("Approvals = %+v, %v; want c2's", as, err)
			}
			hash := as[0].ArgsHash
			n.close(t)

			n = openDeferNodeUnder(t, dir, tc.maxApprove, tc.exclude)
			defer n.close(t)
			if st := n.confirm(t, "c2", hash, true); st != confirmAccepted {
				t.Fatalf("the answer = %q, want accepted", st)
			}
			e := n.nextResult(t)
			if got := n.p.count("c2"); got != 0 {
				t.Fatalf("the approved call ran %d times under the operator's lowered policy, want never", got)
			}
			m := committed(t, n.store, "c2")
			if e.Status != "skipped" || m.Status != "skipped" || !strings.Contains(m.Content, tc.want) {
				t.Errorf("committed %s %q (event %s), want skipped naming %q", m.Status, m.Content, e.Status, tc.want)
			}
		})
	}
}
