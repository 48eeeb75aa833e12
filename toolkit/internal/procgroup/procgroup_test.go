package procgroup

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestStopEndsTheWholeGroup(t *testing.T) {
	// A shell that leaves a grandchild behind and ignores SIGTERM.
	cmd := exec.Command("sh", "-c", "trap '' TERM; sleep 30 & sleep 30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	pgid := cmd.Process.Pid
	time.Sleep(50 * time.Millisecond)
	if !Alive(pgid) {
		t.Fatal("the group is not running")
	}
	Stop(pgid, 200*time.Millisecond, syscall.SIGTERM, syscall.SIGKILL)
	if Alive(pgid) {
		t.Fatal("a member of the group survived Stop")
	}
	Stop(pgid, time.Millisecond, syscall.SIGKILL) // an empty group is fine
}
