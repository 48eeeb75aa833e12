package badger

import "testing"

func TestSpaceNeeds(t *testing.T) {
	for _, tc := range []struct {
		name           string
		o              Options
		reserve, floor uint64
	}{
		{"small", Options{Dir: "d", Small: true}, 4<<20 + 16<<20, 4 << 20},
		{"default", Options{Dir: "d"}, 64<<20 + 1<<30 - 1, 64 << 20},
		{"in memory", Options{InMemory: true}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, f := SpaceNeeds(tc.o)
			if r != tc.reserve || f != tc.floor {
				t.Errorf("SpaceNeeds = %d, %d; want %d, %d", r, f, tc.reserve, tc.floor)
			}
		})
	}
}
