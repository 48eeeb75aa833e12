package bench

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Workload names shared by the rows and the targets.
const (
	wNoop         = "no-op 100-call turn"
	wOneNoop      = "no-op one-call turn"
	wOneCalc      = "calculate one-call turn"
	wFour         = "mixed 4-call turn (3 concurrent, 1 sequential)"
	wBigTurn      = "no-op 4 096-call turn"
	wSessions     = "64 sessions in parallel, no fsync"
	wSessionsSync = "64 sessions in parallel, fsync"
	wMany         = "100 000 sessions, one turn each, no fsync"
	wTurnEarly    = "turn 10 of one run (100 calls)"
	wTurnLate     = "turn 1 000 of one run (100 calls)"
	wIdle         = "idle session, not passivated"
	wIdlePassive  = "idle session, passivated"
	wFetch        = "cached 20 KB fetch_page through the filter"
)

// mallocs is the process's count of heap allocations so far.
func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// parallel runs turns of calls no-op calls on sessions sessions named
// prefix+i, with workers goroutines: worker w takes sessions w, w+workers, …
// and runs turns turns on each in order, numbered from seq0. It returns the
// elapsed time and the allocations made meanwhile.
func parallel(ctx context.Context, s *system, prefix string, sessions, workers, turns, calls, seq0 int) (time.Duration, uint64, error) {
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	runtime.GC()
	m0 := mallocs()
	t0 := time.Now()
	for w := range min(workers, sessions) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < sessions; i += workers {
				id := prefix + strconv.Itoa(i)
				for k := range turns {
					if err := s.dispatch(ctx, Turn(id, seq0+k, repeat("noop", calls), 0)); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(t0)
	m := mallocs() - m0
	close(errs)
	return d, m, <-errs
}

func (r *runner) sessions(ctx context.Context) error {
	const sessions, calls = 64, 10
	turns := r.pick(40, 5)
	rounds := min(r.o.Rounds, r.pick(3, 1))
	for _, c := range []struct {
		kind  string
		fsync bool
	}{{SysBadger, false}, {SysBadger, true}, {SysMemory, false}, {SysBare, false}, {SysBare, true}} {
		workload := wSessions
		if c.fsync {
			workload = wSessionsSync
		}
		s, err := openSystem(c.kind, c.fsync, 3, 0)
		if err != nil {
			return err
		}
		row := Row{Workload: workload, System: c.kind, Unit: "calls/s", Note: fmt.Sprintf("%d-call turns", calls)}
		var perCall []float64
		for round := 0; round < rounds; round++ {
			d, m, err := parallel(ctx, s, "s", sessions, sessions, turns, calls, round*turns)
			if err != nil {
				s.close()
				return err
			}
			n := sessions * turns * calls
			row.Rounds = append(row.Rounds, float64(n)/d.Seconds())
			perCall = append(perCall, float64(m)/float64(n))
		}
		s.close()
		row.AllocsPerCall = median(perCall)
		row.AllocsPerTurn = row.AllocsPerCall * calls
		r.rep.add(row)
	}
	return nil
}

// manySessions: 100 000 sessions, one 10-call turn each, driven by 64
// clients, against the 64 sessions of sessions (the same turns, the same
// number of clients): what a growing number of sessions costs.
func (r *runner) manySessions(ctx context.Context) error {
	const calls, workers = 10, 64
	n := r.pick(100000, 2000)
	for _, kind := range []string{SysBadger, SysMemory, SysBare} {
		s, err := openSystem(kind, false, 3, 0)
		if err != nil {
			return err
		}
		d, m, err := parallel(ctx, s, "many-", n, workers, 1, calls, 0)
		s.close()
		if err != nil {
			return err
		}
		r.rep.add(Row{Workload: wMany, System: kind, Unit: "calls/s", Rounds: []float64{float64(n*calls) / d.Seconds()},
			AllocsPerCall: float64(m) / float64(n*calls), AllocsPerTurn: float64(m) / float64(n),
			Note: fmt.Sprintf("%d sessions measured, %d-call turns, %d clients, one round", n, calls, workers)})
	}
	return nil
}

func (r *runner) bigTurn(ctx context.Context) error {
	return r.perCall(ctx, wBigTurn, r.pick(10, 1), func(seq int) *messages.DispatchTurn {
		return Turn("big", seq, repeat("noop", 4096), 0)
	})
}

// lateTurns runs one session through one run of 100-call turns and
// compares the turns around the 10th with the last ones (1 000 in the full
// run, 100 with Quick): the de-duplication table and the history grow with
// every turn, and later turns must not get slower.
func (r *runner) lateTurns(ctx context.Context) error {
	const calls = 100
	total := r.pick(1005, 105)
	late := wTurnLate
	if r.o.Quick {
		late = "turn 100 of one run (100 calls)"
	}
	for _, kind := range []string{SysBadger, SysMemory, SysBare} {
		s, err := openSystem(kind, false, 3, 0)
		if err != nil {
			return err
		}
		per := make([]float64, total)
		allocs := make([]float64, total)
		for k := range total {
			t := Turn("late", k, repeat("noop", calls), 0)
			m0 := mallocs()
			t0 := time.Now()
			if err := s.dispatch(ctx, t); err != nil {
				s.close()
				return err
			}
			per[k] = float64(time.Since(t0).Nanoseconds()) / calls / 1e3
			allocs[k] = float64(mallocs() - m0)
		}
		s.close()
		// Turns 5–14 and the last 10: turn 10 and turn total-5 are their middles.
		early, last := per[4:14], per[total-10:]
		r.rep.add(Row{Workload: wTurnEarly, System: kind, Unit: "µs/call", Rounds: early,
			AllocsPerTurn: median(allocs[4:14]), AllocsPerCall: median(allocs[4:14]) / calls,
			Note: "median of turns 5–14 of one run"})
		r.rep.add(Row{Workload: late, System: kind, Unit: "µs/call", Rounds: last,
			AllocsPerTurn: median(allocs[total-10:]), AllocsPerCall: median(allocs[total-10:]) / calls,
			Note: fmt.Sprintf("median of turns %d–%d of the same run", total-9, total)})
	}
	return nil
}

// idle measures the heap an idle session holds: n sessions each commit a
// one-call turn, then either stay (not passivated: SessionIdle of an hour)
// or are passivated (SessionIdle of 20 ms, and the heap is read once it
// stops shrinking). The baseline is the open system with one session, so
// the store's fixed cost (Badger's tables and caches) is not the sessions'.
func (r *runner) idle(ctx context.Context) error {
	n := r.pick(100000, 1000)
	for _, passivated := range []bool{false, true} {
		for _, kind := range []string{SysBadger, SysMemory} {
			idleAfter := time.Hour
			if passivated {
				idleAfter = 20 * time.Millisecond
			}
			s, err := openSystem(kind, false, 3, idleAfter)
			if err != nil {
				return err
			}
			if err := s.dispatch(ctx, Turn("idle-base", 0, []string{"noop"}, 0)); err != nil {
				s.close()
				return err
			}
			before := heap()
			d, m, err := parallel(ctx, s, "idle-", n, 8, 1, 1, 0)
			if err != nil {
				s.close()
				return err
			}
			var after runtime.MemStats
			if passivated {
				after = settledHeap(ctx, 30*time.Second)
			} else {
				after = heap()
			}
			s.close()
			delta := float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
			inuse := float64(int64(after.HeapInuse) - int64(before.HeapInuse))
			w := wIdle
			if passivated {
				w = wIdlePassive
			}
			r.rep.add(Row{Workload: w, System: kind, Unit: "KiB/session", Rounds: []float64{delta / 1024 / float64(n)},
				AllocsPerTurn: float64(m) / float64(n),
				Note: fmt.Sprintf("%d sessions, one 1-call turn each (%.0f turns/s); HeapAlloc delta %.1f MiB after GC, HeapInuse delta %.1f MiB; store records included",
					n, float64(n)/d.Seconds(), delta/(1<<20), inuse/(1<<20))})
		}
	}
	return nil
}

// heap returns the memory statistics after two collections.
func heap() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// settledHeap reads the heap every 100 ms until it has not shrunk by more
// than 0.5 % three times in a row (passivations done), or until limit.
func settledHeap(ctx context.Context, limit time.Duration) runtime.MemStats {
	deadline := time.Now().Add(limit)
	last := heap()
	steady := 0
	for steady < 3 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		m := heap()
		if float64(m.HeapAlloc) >= 0.995*float64(last.HeapAlloc) {
			steady++
		} else {
			steady = 0
		}
		last = m
	}
	return last
}
