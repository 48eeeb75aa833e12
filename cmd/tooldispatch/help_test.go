package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestHelpOnStdout: every way of asking for help prints it on stdout and
// exits 0, with nothing on stderr.
func TestHelpOnStdout(t *testing.T) {
	tests := [][]string{
		{"--help"}, {"-h"}, {"help"},
		{"run", "--help"}, {"run", "-h"},
		{"tools", "--help"}, {"session", "--help"}, {"serve", "--help"},
		{"chaos", "--help"}, {"chaos", "plan", "--help"}, {"chaos", "report", "--help"},
		{"bench", "--help"}, {"version", "--help"},
		{"help", "session"}, {"help", "chaos"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			e, stdout, stderr := testEnv(strings.NewReader(""))
			if got := e.main(args); got != exitOK {
				t.Errorf("exit status %d, want 0", got)
			}
			if !strings.Contains(stdout.String(), "Usage") {
				t.Errorf("stdout has no usage:\n%s", stdout.String())
			}
			if stderr.String() != "" {
				t.Errorf("stderr is not empty:\n%s", stderr.String())
			}
		})
	}
}

// TestHelpListsOnlyOwnFlags: each command's help lists the flags it uses
// and no other.
func TestHelpListsOnlyOwnFlags(t *testing.T) {
	tests := []struct {
		args       []string
		want, dont []string
	}{
		{
			args: []string{"run", "--help"},
			want: []string{"--workspace", "--data", "--config", "--provider", "--approve", "--max-concurrency", "--session", "--run", "--log-level", "--shell", "--events", "--fsync", "--confirm-timeout", "--chaos"},
			dont: []string{"--all", "--addr", "--json"},
		},
		{
			args: []string{"session", "--help"},
			want: []string{"--workspace", "--data", "--session", "--log-level"},
			dont: []string{"--approve", "--shell", "--max-concurrency", "--provider", "--run", "--config", "--events", "--chaos"},
		},
		{
			args: []string{"tools", "--help"},
			want: []string{"--workspace", "--config", "--provider", "--shell", "--all", "--log-level"},
			dont: []string{"--approve", "--max-concurrency", "--session", "--run", "--data", "--events"},
		},
		{
			args: []string{"serve", "--help"},
			want: []string{"--workspace", "--data", "--config", "--approve", "--max-concurrency", "--shell", "--addr", "--token", "--grace", "--chaos"},
			dont: []string{"--provider", "--session", "--run ", "--events", "--all"},
		},
		{
			args: []string{"chaos", "report", "--help"},
			want: []string{"--workspace", "--data", "--session", "--run", "--json"},
			dont: []string{"--approve", "--shell", "--max-concurrency", "--provider", "--config", "--chaos"},
		},
		{
			args: []string{"chaos", "plan", "--help"},
			want: []string{"--chaos", "--run", "--first-turn"},
			dont: []string{"--approve", "--shell", "--max-concurrency", "--provider", "--config", "--workspace", "--data", "--session"},
		},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			e, stdout, _ := testEnv(strings.NewReader(""))
			if got := e.main(tt.args); got != exitOK {
				t.Fatalf("exit status %d", got)
			}
			help := stdout.String() + " "
			for _, f := range tt.want {
				if !strings.Contains(help, "  "+f+" ") && !strings.Contains(help, "  "+f+"\n") {
					t.Errorf("help does not list %s:\n%s", f, help)
				}
			}
			for _, f := range tt.dont {
				if strings.Contains(help, "  "+strings.TrimSpace(f)+" ") || strings.Contains(help, "  "+strings.TrimSpace(f)+"\n") {
					t.Errorf("help lists %s, which the command does not use:\n%s", f, help)
				}
			}
		})
	}
}

// TestSubcommandRejectsForeignFlags: a flag of another command is a usage
// error, not silently ignored.
func TestSubcommandRejectsForeignFlags(t *testing.T) {
	for _, args := range [][]string{
		{"session", "--approve", "all"},
		{"session", "--shell"},
		{"session", "--max-concurrency", "4"},
		{"tools", "--approve", "none"},
	} {
		e, _, stderr := testEnv(strings.NewReader(""))
		if got := e.main(args); got != exitUsage {
			t.Errorf("%q: exit status %d, want %d; stderr:\n%s", args, got, exitUsage, stderr.String())
		}
	}
}

func TestVersionCommand(t *testing.T) {
	e, stdout, stderr := testEnv(strings.NewReader(""))
	if got := e.main([]string{"version"}); got != exitOK {
		t.Fatalf("exit status %d; stderr:\n%s", got, stderr.String())
	}
	out := stdout.String()
	for _, s := range []string{"tooldispatch ", "go: " + runtime.Version(), "commit: "} {
		if !strings.Contains(out, s) {
			t.Errorf("version output lacks %q:\n%s", s, out)
		}
	}
	if e, _, _ := testEnv(strings.NewReader("")); e.main([]string{"version", "extra"}) != exitUsage {
		t.Error("version with an argument is not a usage error")
	}
}

func TestRunHelpText(t *testing.T) {
	e, stdout, _ := testEnv(strings.NewReader(""))
	if got := e.main([]string{"run", "-h"}); got != exitOK {
		t.Fatalf("exit status %d", got)
	}
	for _, s := range []string{"Usage: tooldispatch run [flags] [FILE|-]", "--events", "--confirm-timeout DURATION", "--pretty"} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("run -h does not contain %q:\n%s", s, stdout.String())
		}
	}
}

// TestUsageMistakeOnStderr: after a mistake one line on stderr says what
// was wrong and where the flags are listed, and stdout stays empty.
func TestUsageMistakeOnStderr(t *testing.T) {
	e, stdout, stderr := testEnv(strings.NewReader(""))
	if got := e.main([]string{"session", "--bogus"}); got != exitUsage {
		t.Fatalf("exit status %d", got)
	}
	if stdout.String() != "" || !strings.Contains(stderr.String(), `"tooldispatch session --help" lists its flags`) {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

func TestWriteVersionFromBuildInfo(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.time", Value: "2025-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	var b strings.Builder
	if err := writeVersion(&b, info); err != nil {
		t.Fatal(err)
	}
	want := "tooldispatch v1.2.3\ncommit: 0123abc+dirty (2025-01-02T03:04:05Z)\ngo: go1.99 " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
