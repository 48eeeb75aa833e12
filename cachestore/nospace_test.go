package cachestore

import "testing"

func TestSize(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 20938752: "19.96 MiB", 20 << 20: "20 MiB",
		1<<30 + 64<<20: "1.06 GiB", 1<<64 - 1: "15.99 EiB",
	} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
