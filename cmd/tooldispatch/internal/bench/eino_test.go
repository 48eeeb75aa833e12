package bench

import (
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestEinoMeasuredFromCheckout runs the eino peer the way `tooldispatch
// bench` does from a checkout: the peers module must build against this
// checkout's module, whatever its own go.sum lists, and both eino rows
// must come back.
func TestEinoMeasuredFromCheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the eino peer module")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	r := &runner{o: Options{Quick: true, Rounds: 1}, rep: &Report{}}
	if err := r.eino(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range r.rep.Notes {
		if strings.HasPrefix(n, "eino:") {
			t.Fatalf("note %q", n)
		}
	}
	for _, s := range []string{SysEino, SysEinoW} {
		row, ok := r.rep.Find(wNoop, s)
		if !ok || len(row.Rounds) == 0 || row.Rounds[0] <= 0 {
			t.Fatalf("no %s row for %q: %+v", s, wNoop, r.rep.Rows)
		}
	}
}
