package main

import (
	"strings"
	"testing"
)

// TestUnknownFlagSuggests: a mistyped flag gets one line that names the
// closest flag of the command (or the commands a flag belongs to) and where
// the list is, exit status 2, and no page of usage.
func TestUnknownFlagSuggests(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"run", "--worksapce", "ws"}, []string{"--worksapce", "did you mean --workspace?", `"tooldispatch run --help"`}},
		{[]string{"serve", "--aprove", "all"}, []string{"--aprove", "did you mean --approve?"}},
		{[]string{"session", "--sesion", "s1"}, []string{"did you mean --session?"}},
		{[]string{"session", "--approve", "all"}, []string{"--approve is a flag of run, serve", "not of session"}},
		{[]string{"tools", "--frobnicate"}, []string{"unknown flag --frobnicate", `"tooldispatch tools --help" lists its flags`}},
		{[]string{"run", "--max-concurrency", "many"}, []string{`invalid value "many" for --max-concurrency`}},
		{[]string{"run", "--workspace"}, []string{"--workspace needs a value"}},
		{[]string{"run", "--approve", "maybe"}, []string{`--approve must be ask, all or none, got "maybe"`}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			e, stdout, stderr := testEnv(strings.NewReader(""))
			if got := e.main(tt.args); got != exitUsage {
				t.Errorf("exit status %d, want %d", got, exitUsage)
			}
			msg := stderr.String()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("stderr %q lacks %q", msg, w)
				}
			}
			if n := strings.Count(strings.TrimSpace(msg), "\n") + 1; n != 1 || strings.Contains(msg, "Usage:") {
				t.Errorf("stderr has %d lines, want one line and no usage:\n%s", n, msg)
			}
			if stdout.String() != "" {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}
