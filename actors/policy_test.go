package actors

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPolicySettledOnce: Prepare settles a turn's approve under the
// dispatcher's ceiling and the caller's narrower one, reports whether a
// ceiling lowered what the turn asked for, and merges the exclusions of
// all three without repeats; Approval gives the same answer without
// preparing, and the caller's turn is not changed.
func TestPolicySettledOnce(t *testing.T) {
	cases := []struct {
		ceiling, narrow, asked string
		want                   string
		lowered                bool
	}{
		{"", "", ApproveAll, ApproveAll, false},
		{"", "", "", ApproveNone, false},
		{ApproveAsk, "", ApproveAll, ApproveAsk, true},
		{ApproveAsk, "", ApproveAsk, ApproveAsk, false},
		{ApproveAsk, "", ApproveNone, ApproveNone, false},
		{ApproveAll, ApproveNone, ApproveAsk, ApproveNone, true},
		{ApproveAll, ApproveAsk, ApproveAll, ApproveAsk, true},
		{ApproveNone, ApproveAll, ApproveAll, ApproveNone, true},
		{ApproveAll, ApproveAll, "", ApproveNone, false},
	}
	for _, tc := range cases {
		name := tc.ceiling + "/" + tc.narrow + "/" + tc.asked
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) {
				c.MaxApprove = tc.ceiling
				c.Exclude = []string{"a", "b"}
			})
			tr := turn("s1", "r1", call("c1", "lookup", `{}`))
			tr.Approve = tc.asked
			tr.Exclude = []string{"b", "d"}
			narrow := Policy{MaxApprove: tc.narrow, Exclude: []string{"c", "a"}}
			p, err := h.d.PrepareWith(tr, narrow)
			if err != nil {
				t.Fatal(err)
			}
			if p.Approve() != tc.want || p.ApproveLowered() != tc.lowered {
				t.Errorf("prepared: approve %q lowered %v, want %q %v", p.Approve(), p.ApproveLowered(), tc.want, tc.lowered)
			}
			if got, lowered := h.d.Approval(tc.asked, narrow); got != tc.want || lowered != tc.lowered {
				t.Errorf("Approval: %q %v, want %q %v", got, lowered, tc.want, tc.lowered)
			}
			if diff := cmp.Diff([]string{"a", "b", "c", "d"}, p.Turn().Exclude); diff != "" {
				t.Errorf("exclusions (-want +got):\n%s", diff)
			}
			if tr.Approve != tc.asked || len(tr.Exclude) != 2 {
				t.Errorf("the caller's turn was changed: approve %q exclude %v", tr.Approve, tr.Exclude)
			}
		})
	}
	h := newHarness(t, nil)
	if _, err := h.d.PrepareWith(turn("s1", "r1"), Policy{MaxApprove: "sometimes"}); err == nil {
		t.Error("a policy with a bad MaxApprove was taken")
	}
}
