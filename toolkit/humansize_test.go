package toolkit

import "testing"

func TestHumanSize(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"}, {256 << 10, "256.0 KiB"}, {3 << 20, "3.0 MiB"},
		{5 << 40, "5.0 TiB"}, {3 << 50, "3.0 PiB"}, {5 << 60, "5120.0 PiB"},
	}
	for _, tt := range tests {
		if got := HumanSize(tt.n); got != tt.want {
			t.Errorf("HumanSize(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
	if got := HumanSize(1536); got != "1.5 KiB" {
		t.Errorf("HumanSize(int 1536) = %q, want 1.5 KiB", got)
	}
}
