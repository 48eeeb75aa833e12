//go:build !linux

package sandbox

import "syscall"

// probe: Landlock exists on Linux only.
func (s *Sandbox) probe() Status {
	return Status{Reason: "Landlock exists on Linux only"}
}

// netNamespace is never called off Linux (Status.NetNamespace is false).
func netNamespace(*syscall.SysProcAttr) {}
