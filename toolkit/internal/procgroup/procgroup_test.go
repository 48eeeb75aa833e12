package procgroup

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStopEndsTheWholeGroup(t *testing.T) {
	// A shell that ignores SIGTERM (its children inherit that) and leaves
	// a grandchild behind; it prints the grandchild's pid once it runs.
	cmd := exec.Command("sh", "-c", "trap '' TERM; sleep 30 & echo $!; sleep 30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the grandchild's pid: %v", err)
	}
	grandchild, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("grandchild pid %q: %v", line, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	pgid := cmd.Process.Pid
	if !Alive(pgid) || !Running(grandchild) {
		t.Fatalf("the group is not running (group alive %v, grandchild running %v)", Alive(pgid), Running(grandchild))
	}
	Stop(pgid, 200*time.Millisecond, syscall.SIGTERM, syscall.SIGKILL)
	if Alive(pgid) {
		t.Fatal("a member of the group survived Stop")
	}
	if Running(grandchild) {
		t.Fatal("the grandchild survived Stop")
	}
	if err := <-waited; err == nil {
		t.Error("the shell exited cleanly; want it killed")
	}
	Stop(pgid, time.Millisecond, syscall.SIGKILL) // an empty group is fine
}
