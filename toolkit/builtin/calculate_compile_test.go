package builtin

import (
	"strconv"
	"sync"
	"testing"
)

func TestCalcCompilerKeepsTheMostRecentPrograms(t *testing.T) {
	c := newCalcCompiler(4, 1000)
	programs := map[string]any{}
	for i := range 10 {
		e := strconv.Itoa(i) + " * 3"
		p, err := c.compile(e)
		if err != nil {
			t.Fatalf("compile(%q): %v", e, err)
		}
		programs[e] = p
		if n := c.len(); n > 4 {
			t.Fatalf("after %d expressions the cache holds %d programs, want at most 4", i+1, n)
		}
	}
	// "9 * 3" is among the last four: the same program comes back.
	if p, _ := c.compile("9 * 3"); p != programs["9 * 3"] {
		t.Fatal(`"9 * 3" was compiled again; want the kept program`)
	}
	// "0 * 3" was evicted: a fresh program.
	if p, _ := c.compile("0 * 3"); p == programs["0 * 3"] {
		t.Fatal(`"0 * 3" came from the cache; want it evicted after 9 newer expressions`)
	}
	if _, err := c.compile("x + 1"); err == nil {
		t.Fatal("compile(x + 1) succeeded")
	}
	if n := c.len(); n != 4 {
		t.Fatalf("cache holds %d programs, want 4 (a refused expression is not kept)", n)
	}
}

func TestCalcCompilerBoundsTheKeptText(t *testing.T) {
	c := newCalcCompiler(100, 20)
	for _, e := range []string{"1 + 2 + 3", "4 + 5 + 6", "7 + 8 + 9"} { // 9 characters each
		if _, err := c.compile(e); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.len(); n != 2 {
		t.Fatalf("cache holds %d programs of 9 characters under a budget of 20, want 2", n)
	}
	if _, err := c.compile("1 + 2 + 3 + 4 + 5 + 6 + 7"); err != nil { // 25 characters
		t.Fatal(err)
	}
	if n := c.len(); n != 2 {
		t.Fatalf("cache holds %d programs, want 2: an expression longer than the budget is not kept", n)
	}
}

// TestCalculateConcurrent runs shared and distinct expressions from many
// goroutines: the programs and configurations are shared (run with -race).
func TestCalculateConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				x := i % (20 + g)
				got, err := Calculate(strconv.Itoa(x) + " * 3 + sqrt(4)")
				if err == nil && got != strconv.Itoa(3*x+2) {
					err = strconv.ErrSyntax
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestCalculateRepeatedExpressionIsCheap: a repeated expression is run from
// its kept program, not configured and compiled again (235 allocations a
// call when every call built an expr configuration and compiled).
func TestCalculateRepeatedExpressionIsCheap(t *testing.T) {
	const e = "(17 * 23) % 7 + sqrt(2) * pi"
	if _, err := Calculate(e); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(50, func() { _, _ = Calculate(e) }); n > 30 {
		t.Fatalf("Calculate of a repeated expression: %.0f allocations, want at most 30", n)
	}
}
