package actors

// The primitives a turn is made of, one benchmark each: the cost model of
// docs/PERFORMANCE.md ("What a turn costs") multiplies these by how often
// a turn makes each.
//
//	go test -run XXX -bench 'Prim' -count 6 ./actors

import (
	"context"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/messages"
)

// sink is an actor that answers a request with its message and counts the
// rest.
type sink struct {
	n    int
	want int
	done chan struct{}
}

func (a *sink) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *ping:
		if ctx.Sender() != nil {
			ctx.Respond(m)
			return
		}
		a.n++
		if a.n == a.want {
			close(a.done)
		}
	}
}

type ping struct{ n int }

// BenchmarkPrimSpawnStop: a parent spawns a child, the child handles its
// Started, the parent stops it and hears its Terminated, as a turn does
// with its pool and a session with its turn (default and synchronized
// dispatcher).
func BenchmarkPrimSpawnStop(b *testing.B) {
	for _, name := range []string{"default", "synchronized", "workers"} {
		b.Run(name, func(b *testing.B) {
			sys := NewActorSystem(zerolog.Nop())
			defer sys.Shutdown()
			wd := newWorkerDispatcher()
			defer wd.close()
			done := make(chan struct{})
			child := actor.PropsFromFunc(func(actor.Context) {})
			switch name {
			case "synchronized":
				child = actor.PropsFromFunc(func(actor.Context) {}, actor.WithDispatcher(syncDispatcher))
			case "workers":
				child = actor.PropsFromFunc(func(actor.Context) {}, actor.WithDispatcher(wd))
			}
			left := b.N
			parent := actor.PropsFromFunc(func(ctx actor.Context) {
				switch ctx.Message().(type) {
				case *actor.Started, *actor.Terminated:
					if left == 0 {
						close(done)
						return
					}
					left--
					ctx.Stop(ctx.Spawn(child))
				}
			})
			if name == "workers" {
				parent = parent.Configure(actor.WithDispatcher(wd))
			}
			b.ReportAllocs()
			b.ResetTimer()
			sys.Root.Spawn(parent)
			<-done
		})
	}
}

// BenchmarkPrimSend: root Send into a mailbox that is already running
// (the messages queue behind each other: no goroutine hand-off each).
func BenchmarkPrimSend(b *testing.B) {
	sys := NewActorSystem(zerolog.Nop())
	defer sys.Shutdown()
	s := &sink{want: b.N, done: make(chan struct{})}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return s }))
	m := &ping{}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		sys.Root.Send(pid, m)
	}
	<-s.done
}

// pinger answers each ping with a ping to its peer until n are done: each
// message reaches an idle mailbox, so each is one hand-off (a new mailbox
// goroutine on the default dispatcher, the sender's on the synchronized).
type pinger struct {
	peer *actor.PID
	left *int
	done chan struct{}
	deep bool // each message uses about 16 KiB of stack, as a turn's work does
}

func (a *pinger) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*ping); ok {
		if *a.left == 0 {
			close(a.done)
			return
		}
		*a.left--
		if a.deep {
			m.n = deepStack(16)
		}
		ctx.Send(a.peer, m)
	}
}

// deepStack uses about n KiB of stack.
//
//go:noinline
func deepStack(n int) int {
	var buf [1000]byte
	buf[n%len(buf)] = byte(n)
	if n == 0 {
		return int(buf[0])
	}
	return deepStack(n-1) + int(buf[n%len(buf)])
}

// BenchmarkPrimHandOff: one message to an idle actor that sends one back
// to the first, per op one hop; default and synchronized dispatcher (the
// pool's).
func BenchmarkPrimHandOff(b *testing.B) {
	for _, c := range []struct {
		name       string
		sync, deep bool
		workers    bool
	}{{"default", false, false, false}, {"synchronized", true, false, false}, {"default/stack=16KiB", false, true, false},
		{"workers", false, false, true}, {"workers/stack=16KiB", false, true, true}} {
		sync := c.sync
		b.Run(c.name, func(b *testing.B) {
			sys := NewActorSystem(zerolog.Nop())
			defer sys.Shutdown()
			wd := newWorkerDispatcher()
			defer wd.close()
			left := b.N
			done := make(chan struct{})
			pa, pb := &pinger{left: &left, done: done, deep: c.deep}, &pinger{left: &left, done: done, deep: c.deep}
			props := func(p *pinger) *actor.Props {
				switch {
				case sync:
					return actor.PropsFromProducer(func() actor.Actor { return p }, actor.WithDispatcher(syncDispatcher))
				case c.workers:
					return actor.PropsFromProducer(func() actor.Actor { return p }, actor.WithDispatcher(wd))
				}
				return actor.PropsFromProducer(func() actor.Actor { return p })
			}
			a := sys.Root.Spawn(props(pa))
			// b runs on the default dispatcher (or the workers): a
			// synchronized pair would recurse on one stack.
			bProps := actor.PropsFromProducer(func() actor.Actor { return pb })
			if c.workers {
				bProps = props(pb)
			}
			bb := sys.Root.Spawn(bProps)
			pa.peer, pb.peer = bb, a
			b.ReportAllocs()
			g0 := goroutinesCreated()
			b.ResetTimer()
			sys.Root.Send(a, &ping{})
			<-done
			b.StopTimer()
			b.ReportMetric(float64(goroutinesCreated()-g0)/float64(b.N), "goroutines/op")
		})
	}
}

// goroutinesCreated is the process's count of goroutines created so far.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// BenchmarkPrimRequestFuture: a root RequestFuture round trip to an idle
// actor (future process, its timer, two hand-offs), as Dispatch makes one
// per turn.
func BenchmarkPrimRequestFuture(b *testing.B) {
	sys := NewActorSystem(zerolog.Nop())
	defer sys.Shutdown()
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &sink{} }))
	m := &ping{}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := sys.Root.RequestFuture(pid, m, RequestTimeout).Result(); err != nil {
			b.Fatal(err)
		}
	}
}

// requester asks its peer with Request and takes the Respond back as a
// message, n times: the turn's and the pool's exchange with the commit
// actor.
type requester struct {
	peer *actor.PID
	left int
	done chan struct{}
}

func (a *requester) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started, *ping:
		if a.left == 0 {
			close(a.done)
			return
		}
		a.left--
		ctx.Request(a.peer, &ping{})
	}
}

// BenchmarkPrimRequestRespond: actor to actor Request and Respond (two
// hand-offs, no future).
func BenchmarkPrimRequestRespond(b *testing.B) {
	for _, workers := range []bool{false, true} {
		name := "default"
		if workers {
			name = "workers"
		}
		b.Run(name, func(b *testing.B) {
			sys := NewActorSystem(zerolog.Nop())
			defer sys.Shutdown()
			wd := newWorkerDispatcher()
			defer wd.close()
			var opts []actor.PropsOption
			if workers {
				opts = append(opts, actor.WithDispatcher(wd))
			}
			peer := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &sink{} }, opts...))
			r := &requester{peer: peer, left: b.N, done: make(chan struct{})}
			b.ReportAllocs()
			b.ResetTimer()
			sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r }, opts...))
			<-r.done
		})
	}
}

// BenchmarkPrimGoroutineHandOff: a goroutine started and waited for with
// a WaitGroup, as the bare dispatcher runs a call.
func BenchmarkPrimGoroutineHandOff(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		wg.Go(func() {})
		wg.Wait()
	}
}

// BenchmarkPrimTimer: the timers of a turn: context.WithTimeout and its
// cancel (a call's deadline, a store call's bound), a time.AfterFunc
// stopped before it fires (a future's timeout, the pool's watchdog), a
// context.WithCancel (the turn's context).
func BenchmarkPrimTimer(b *testing.B) {
	b.Run("WithTimeout", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, cancel := context.WithTimeout(context.Background(), time.Minute)
			cancel()
		}
	})
	b.Run("AfterFunc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			t := time.AfterFunc(time.Minute, func() {})
			t.Stop()
		}
	})
	b.Run("WithCancel", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, cancel := context.WithCancel(context.Background())
			cancel()
		}
	})
}

// BenchmarkPrimEmit: one event through an emitter to a sink that keeps
// nothing, and the same with nobody listening (the bench's case).
func BenchmarkPrimEmit(b *testing.B) {
	for _, listen := range []bool{true, false} {
		name := "sink"
		if !listen {
			name = "nobody"
		}
		b.Run(name, func(b *testing.B) {
			cfg := &Config{Clock: time.Now}
			if listen {
				cfg.Events = func(*messages.Event) {}
			}
			em := newEmitter(cfg, "s", "r", 1, "q")
			b.ReportAllocs()
			for b.Loop() {
				em.call(EventToolCallStart, "c1", "noop")
			}
		})
	}
}

// costTurn is a committed turn of n no-op calls, as the workloads make
// them.
func costTurn(n int) (*messages.TurnRecord, *cachestore.Intent) {
	t := noopTurn("s", 1, n)
	rec := &messages.TurnRecord{Turn: 1, Run: "bench", Assistant: t.Message, Provider: t.Provider, TimeUnixNano: 1}
	in := &cachestore.Intent{Session: "s", Turn: 1, Run: "bench", Provider: t.Provider, Assistant: t.Message,
		Decided: map[int]*messages.ToolMessage{}, Names: make([]string, n), IDs: make([]string, n)}
	for i, tc := range t.Message.ToolCalls {
		rec.ToolMessages = append(rec.ToolMessages, &messages.ToolMessage{Role: "tool", ToolCallId: tc.Id, Name: "noop", Status: "ok", Content: "ok"})
		in.Names[i], in.IDs[i] = "noop", tc.Id
		in.Started = append(in.Started, i)
	}
	return rec, in
}

// BenchmarkPrimEncode: a turn record's and an intent's encoding (what the
// store writes), and one de-dup entry's, for one-call and 100-call turns.
func BenchmarkPrimEncode(b *testing.B) {
	for _, n := range []int{1, 100} {
		rec, in := costTurn(n)
		b.Run("record/calls="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := cachestore.MarshalValid(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("intent/calls="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cachestore.EncodeIntent(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("dedup", func(b *testing.B) {
		e := &cachestore.DedupEntry{Key: "0123456789abcdef0123456789abcdef", Tool: "noop", Content: "ok"}
		b.ReportAllocs()
		for b.Loop() {
			_ = cachestore.EncodeDedup(e)
		}
	})
}

// BenchmarkTurnCounts counts what a turn of n no-op calls makes, one turn
// after another in one session, on Badger: protoactor process ids (every
// spawn and every future takes one), goroutines created (on the default
// dispatcher one per mailbox run that found its mailbox idle: a hand-off)
// and allocations. These verify the counts of the cost model.
func BenchmarkTurnCounts(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run("calls="+strconv.Itoa(n), func(b *testing.B) {
			store, err := badger.Open(badger.Options{Dir: b.TempDir(), Small: true, Logger: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			d, err := New(Config{Registry: noopRegistry(), Store: store, MaxConcurrency: 3})
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = d.Close(ctx)
			}()
			ctx := context.Background()
			if _, err := d.Dispatch(ctx, noopTurn("counts", 0, n)); err != nil {
				b.Fatal(err)
			}
			reg := d.system.ProcessRegistry
			ids0, g0 := atomic.LoadUint64(&reg.SequenceID), goroutinesCreated()
			b.ReportAllocs()
			i := 1
			for b.Loop() {
				if _, err := d.Dispatch(ctx, noopTurn("counts", i, n)); err != nil {
					b.Fatal(err)
				}
				i++
			}
			turns := float64(i - 1)
			b.ReportMetric(float64(atomic.LoadUint64(&reg.SequenceID)-ids0)/turns, "pids/turn")
			b.ReportMetric(float64(goroutinesCreated()-g0)/turns, "goroutines/turn")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/turns, "ns/turn")
		})
	}
}

// BenchmarkPrimKeptHandOff: a hand-off between two goroutines that are
// kept (parked on a channel, stacks grown), per hop: the least a hand-off
// between two actors could cost.
func BenchmarkPrimKeptHandOff(b *testing.B) {
	ab, ba := make(chan int), make(chan int)
	go func() {
		for n := range ab {
			ba <- deepStack(16) + n
		}
		close(ba)
	}()
	b.ReportAllocs()
	for b.Loop() {
		ab <- 1
		<-ba
	}
	close(ab)
	<-ba
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/hop")
}
