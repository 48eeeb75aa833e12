package actors

import (
	"context"
	"strings"
	"testing"
)

// TestSkippedWithoutApprovalSaysWhatToSet: a call that changes things,
// skipped because approval is none, says what to set for it to be asked
// or run: the turn's Approve when the turn left it at none (the Approver is
// then never asked), MaxApprove when the ceiling is none, or the host's
// own words (the command's flags, the request body) when it gives them.
func TestSkippedWithoutApprovalSaysWhatToSet(t *testing.T) {
	approver := func(context.Context, ApprovalRequest) (bool, string) { return true, "" }
	tests := []struct {
		name    string
		cfg     func(*Config)
		approve string
		want    []string
	}{
		{"turn without Approve", func(c *Config) { c.Approver = approver }, "", []string{`Approve: "ask"`, "Config.Approver"}},
		{"turn with Approve none", nil, ApproveNone, []string{`Approve: "ask"`}},
		{"ceiling none", func(c *Config) { c.MaxApprove = ApproveNone }, ApproveAll, []string{`Config.MaxApprove is "none"`}},
		{"host words for the turn", func(c *Config) {
			c.ApproveHints = ApproveHints{Turn: `send "approve":"ask"`, Ceiling: "start with --approve ask"}
		}, ApproveNone, []string{`send "approve":"ask"`}},
		{"host words for the ceiling", func(c *Config) {
			c.MaxApprove = ApproveNone
			c.ApproveHints = ApproveHints{Turn: `send "approve":"ask"`, Ceiling: "start with --approve ask"}
		}, ApproveAsk, []string{"start with --approve ask"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.cfg)
			tr := turn("s1", "r1", call("w1", "write", `{"path":"x"}`))
			tr.Approve = tt.approve
			r := h.dispatch(tr)
			m := r.Messages[0]
			if m.Status != "skipped" {
				t.Fatalf("w1 = %s: %s", m.Status, m.Content)
			}
			for _, want := range tt.want {
				if !strings.Contains(m.Content, want) {
					t.Errorf("the skipped call says %q; want it to name %s", m.Content, want)
				}
			}
			if !strings.HasSuffix(m.Content, "Do not repeat it unless the user asks you to; find another way or ask the user.") {
				t.Errorf("the skipped call lost its advice to the model: %q", m.Content)
			}
		})
	}
}
