package procgroup

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// poll is how often a signalled group is checked.
const poll = 10 * time.Millisecond

// Stop sends each signal in turn to process group pgid while a member still
// runs, waiting at most grace after each for the group to be gone.
func Stop(pgid int, grace time.Duration, signals ...syscall.Signal) {
	for _, sig := range signals {
		if !Alive(pgid) {
			return
		}
		_ = syscall.Kill(-pgid, sig)
		for deadline := time.Now().Add(grace); time.Now().Before(deadline); {
			if !Alive(pgid) {
				return
			}
			time.Sleep(poll)
		}
	}
}

// Alive reports whether process group pgid has a member that still runs.
// Zombies do not count: members orphaned by the leader are reaped by init,
// which may take a while or, in some containers, never happen.
func Alive(pgid int) bool {
	if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	want := strconv.Itoa(pgid)
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		state, pgrp, ok := procState(e.Name())
		if ok && pgrp == want && state != "Z" && state != "X" {
			return true
		}
	}
	return false
}

// procState reads a process's state letter and process group from
// /proc/PID/stat ("pid (comm) state ppid pgrp …"; comm may hold spaces).
func procState(pid string) (state, pgrp string, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "", "", false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return "", "", false
	}
	return f[0], f[2], true
}

// Running reports whether process pid runs (exists and is not a zombie).
func Running(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	state, _, ok := procState(strconv.Itoa(pid))
	return ok && state != "Z" && state != "X"
}
