//go:build !linux

package sandbox

// probe: Landlock exists on Linux only.
func (s *Sandbox) probe() Status {
	return Status{Reason: "Landlock exists on Linux only"}
}
