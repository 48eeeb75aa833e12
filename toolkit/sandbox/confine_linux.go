//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The securebits a confined thread locks in: root gains no capability by
// running a program (NOROOT), changing uids adjusts none (NO_SETUID_FIXUP),
// none may be raised into the ambient set, and none of it can be undone.
const secureBits = 1<<0 | 1<<1 | // SECBIT_NOROOT, _LOCKED
	1<<2 | 1<<3 | // SECBIT_NO_SETUID_FIXUP, _LOCKED
	1<<5 | // SECBIT_KEEP_CAPS_LOCKED (KEEP_CAPS off)
	1<<6 | 1<<7 // SECBIT_NO_CAP_AMBIENT_RAISE, _LOCKED

// confine restricts the calling thread, which must be locked to its
// goroutine, and so the program it then starts or execs: no_new_privs,
// every capability dropped (bounding, effective, permitted, inheritable,
// ambient), then the Landlock ruleset of p. It returns the Landlock ABI in
// force.
func confine(p policy) (int, error) {
	abi := landlockABI()
	if abi < 1 {
		return 0, errors.New("no Landlock on this kernel")
	}
	fd, flags, err := ruleset(p, abi).NewRulesetFD(rules(p, abi)...)
	if err != nil {
		return 0, fmt.Errorf("building the Landlock ruleset: %w", err)
	}
	if fd < 0 {
		return 0, fmt.Errorf("no ruleset from Landlock ABI %d", abi)
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("setting no_new_privs: %w", err)
	}
	if err := dropCapabilities(); err != nil {
		return 0, err
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return 0, fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return abi, nil
}

// dropCapabilities empties every capability set of the calling thread and
// checks that they are empty. The bounding set can be emptied only with
// CAP_SETPCAP; a thread without it (a non-root user's) has no capability
// to lose, and no_new_privs keeps it from gaining any.
func dropCapabilities() error {
	setpcap, err := hasEffective(unix.CAP_SETPCAP)
	if err != nil {
		return err
	}
	last := lastCapability()
	if setpcap {
		for c := 0; c <= last; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
				return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
			}
		}
		if err := unix.Prctl(unix.PR_SET_SECUREBITS, secureBits, 0, 0, 0); err != nil {
			return fmt.Errorf("setting securebits: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing the ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		return fmt.Errorf("dropping the capabilities: %w", err)
	}
	return checkNoCapabilities(setpcap, last)
}

// checkNoCapabilities fails unless every capability set of the calling
// thread is empty (the bounding set only when it could be emptied).
func checkNoCapabilities(bounding bool, last int) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var got [2]unix.CapUserData
	if err := unix.Capget(&hdr, &got[0]); err != nil {
		return fmt.Errorf("reading the capabilities: %w", err)
	}
	for _, d := range got {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return fmt.Errorf("capabilities left after dropping them: %+v", got)
		}
	}
	for c := 0; c <= last; c++ {
		if set, _ := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(c), 0, 0); set == 1 {
			return fmt.Errorf("ambient capability %d left after clearing them", c)
		}
		if !bounding {
			continue
		}
		if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err != nil || in != 0 {
			return fmt.Errorf("capability %d left in the bounding set (%v)", c, err)
		}
	}
	return nil
}

// hasEffective reports whether capability c is in the calling thread's
// effective set.
func hasEffective(c int) (bool, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var got [2]unix.CapUserData
	if err := unix.Capget(&hdr, &got[0]); err != nil {
		return false, fmt.Errorf("reading the capabilities: %w", err)
	}
	return got[c/32].Effective&(1<<(c%32)) != 0, nil
}

// lastCapability is the highest capability this kernel knows: the last
// one PR_CAPBSET_READ accepts.
func lastCapability() int {
	last := unix.CAP_LAST_CAP
	for c := 0; c < 64; c++ {
		if _, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err != nil {
			return c - 1
		}
		last = c
	}
	return last
}

// CloseOnExec marks every descriptor above stderr close-on-exec, so that
// none this process was handed (by its parent, say) reaches a program it
// starts; descriptors passed on on purpose (exec.Cmd's ExtraFiles) are set
// up by the start itself. The helper's stages call it first; a program
// that starts children unconfined too (tooldispatch) calls it once at
// start.
func CloseOnExec() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Kernels before 5.11: one descriptor at a time.
	entries, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("marking descriptors close-on-exec: %v; listing them: %v", err, rerr)
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("marking descriptor %d close-on-exec: %w", fd, err)
		}
	}
	return nil
}
