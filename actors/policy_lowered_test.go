package actors

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPolicyLoweredEvent: a turn whose approve is above Config.MaxApprove,
// or above the ceiling its caller applied (ApproveAsked), starts with a
// policy_lowered event naming the approval asked for and the one applied;
// a turn within the ceiling has none.
func TestPolicyLoweredEvent(t *testing.T) {
	tests := []struct {
		name                   string
		ceiling, approve, told string
		want                   []string // asked, applied; nil for no event
	}{
		{"the dispatcher's ceiling", ApproveAsk, ApproveAll, "", []string{ApproveAll, ApproveAsk}},
		{"the caller's ceiling", ApproveAll, ApproveNone, ApproveAll, []string{ApproveAll, ApproveNone}},
		{"both", ApproveNone, ApproveAsk, ApproveAll, []string{ApproveAll, ApproveNone}},
		{"within", ApproveAll, ApproveAll, "", nil},
		{"lowered by the turn itself", ApproveAll, ApproveNone, ApproveNone, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.MaxApprove = tt.ceiling })
			tr := turn("s1", "r1", call("c1", "echo", `{}`))
			tr.Approve, tr.ApproveAsked = tt.approve, tt.told
			h.dispatch(tr)
			h.mu.Lock()
			defer h.mu.Unlock()
			var got []string
			for i, e := range h.events {
				if e.Kind != EventPolicyLowered {
					continue
				}
				if i != 0 || e.Seq != 1*seqPerBlock+1 || e.CallId != "" {
					t.Errorf("policy_lowered is event %d, seq %d, call %q: want the turn's first, with no call", i, e.Seq, e.CallId)
				}
				got = append(got, e.ApproveAsked, e.ApproveApplied)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("policy_lowered (-want +got):\n%s", diff)
			}
		})
	}
}
