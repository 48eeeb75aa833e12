package chaos

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
)

func heapAndGoroutines() (uint64, int) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, runtime.NumGoroutine()
}

// TestSoak: steady load on 4 sessions with faults mixed in (panics, hangs,
// small floods, store write failures every 50th turn) for
// TOOLDISPATCH_SOAK_SECONDS (CI: 20). Goroutines and heap must be flat at
// the end; goleak (TestMain) checks nothing is left after Close.
func TestSoak(t *testing.T) {
	secs := envInt("TOOLDISPATCH_SOAK_SECONDS", 20)
	if testing.Short() {
		secs = 3
	}
	e := newEnv(t, nil)
	// Warm up, then take the baseline.
	for i := 0; i < 20; i++ {
		e.mustDispatch(turn(fmt.Sprintf("w%d", i%4), call("e", "echo", fmt.Sprintf(`{"n":%d}`, i))), 10*time.Second)
	}
	heap0, g0 := heapAndGoroutines()
	end := time.Now().Add(time.Duration(secs) * time.Second)
	turns, calls, infra := 0, 0, 0
	for i := 0; time.Now().Before(end); i++ {
		sess := fmt.Sprintf("s%d", i%4)
		cs := []*messages.ToolCall{
			call("e1", "echo", fmt.Sprintf(`{"n":%d}`, i)),
			call("n1", "note", fmt.Sprintf(`{"n":%d}`, i)),
			call("e2", "echo", fmt.Sprintf(`{"x":"%d"}`, i)),
		}
		switch i % 10 {
		case 3:
			cs = append(cs, call("p", "panic", fmt.Sprintf(`{"n":%d}`, i)))
		case 6:
			cs = append(cs, call("h", "hang", fmt.Sprintf(`{"n":%d}`, i)))
		case 9:
			cs = append(cs, call("f", "flood", `{"n":64}`))
		}
		fail := i%50 == 49
		e.store.FailWrites.Store(fail)
		r, err := e.dispatch(turn(sess, cs...), 20*time.Second)
		e.store.FailWrites.Store(false)
		turns++
		calls += len(cs)
		if err != nil {
			if !fail {
				t.Fatalf("turn %d: %v", i, err)
			}
			infra++
			continue
		}
		if fail {
			t.Fatalf("turn %d: a failed store write reported no error", i)
		}
		checkOneResultEach(t, turn(sess, cs...), r)
	}
	heap1, g1 := heapAndGoroutines()
	t.Logf("FIGURES soak: %ds, turns=%d calls=%d infra_errors=%d goroutines %d -> %d, heap %d KiB -> %d KiB",
		secs, turns, calls, infra, g0, g1, heap0>>10, heap1>>10)
	if g1 > g0+5 {
		t.Errorf("goroutines grew from %d to %d", g0, g1)
	}
	// Committed turns stay in the in-memory store; allow it 64 MiB.
	if heap1 > heap0+64<<20 {
		t.Errorf("heap grew from %d KiB to %d KiB", heap0>>10, heap1>>10)
	}
}
