package sandbox

import (
	"os/exec"
	"testing"
)

// BenchmarkConfinedTrue runs true(1) through each way of confining: the
// cost the sandbox adds to every command.
func BenchmarkConfinedTrue(b *testing.B) {
	ws := b.TempDir()
	ways := []struct {
		name string
		set  func(*Status)
	}{
		{"unconfined", nil},
		{"Landlock alone", func(st *Status) { st.PIDNamespace, st.NetNamespace = false, false }},
		{"network namespace", func(st *Status) { st.PIDNamespace = false }},
		{"PID and network namespaces", func(st *Status) {}},
	}
	for _, w := range ways {
		b.Run(w.name, func(b *testing.B) {
			sb, err := New(Config{}, Options{Workspace: ws})
			if err != nil {
				b.Fatal(err)
			}
			defer sb.Close()
			if !sb.Status().PIDNamespace {
				b.Skip("no PID namespace on this host")
			}
			if w.set != nil {
				w.set(&sb.status)
			}
			for b.Loop() {
				cmd := exec.Command("true")
				cmd.Dir = ws
				if w.set != nil {
					if err := sb.Wrap(cmd); err != nil {
						b.Fatal(err)
					}
				}
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
