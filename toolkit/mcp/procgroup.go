package mcp

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// groupGrace bounds the wait for a killed process group to be gone.
	groupGrace = 500 * time.Millisecond
	// groupPoll is how often a killed process group is checked.
	groupPoll = 10 * time.Millisecond
)

// endGroup kills what is left of process group pgid (whatever a stdio
// server started) and waits, at most groupGrace, until none of its members
// runs any more.
func endGroup(pgid int) {
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		return // ESRCH: the group is empty
	}
	for deadline := time.Now().Add(groupGrace); groupRunning(pgid) && time.Now().Before(deadline); {
		time.Sleep(groupPoll)
	}
}

// groupRunning reports whether a member of process group pgid is still
// running; zombies do not count (orphans wait for init to reap them).
func groupRunning(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	want := strconv.Itoa(pgid)
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp …"; comm may hold spaces.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 3 && f[2] == want && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}
