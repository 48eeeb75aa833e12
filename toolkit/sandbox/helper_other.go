//go:build !linux

package sandbox

// probe: Landlock exists on Linux only.
func (s *Sandbox) probe() Status {
	return Status{Reason: "Landlock exists on Linux only"}
}

// CloseOnExec: descriptors are left as they are off Linux.
func CloseOnExec() error { return nil }
