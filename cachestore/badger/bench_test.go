package badger

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
	"github.com/tooldispatch/tooldispatch/messages"
)

const benchMessagesPerTurn = 100

// benchTurn is a 100-call turn: an assistant message with 100 calls and
// 100 tool messages of about 200 bytes each. Records built from it share
// its sub-messages, which the stores only read.
var benchTurn = func() *messages.TurnRecord {
	rec := storetest.Record(1, "r", "", benchMessagesPerTurn)
	for _, m := range rec.ToolMessages {
		m.Content += " " + strings.Repeat("x", 160)
	}
	return rec
}()

// BenchmarkCommitTurn commits 100-message turns from 64 (or 1) sessions at
// once, each session committing its turns in order; one op is one turn.
func BenchmarkCommitTurn(b *testing.B) {
	for _, bc := range []struct {
		name     string
		sessions int
		open     func(b *testing.B) cachestore.Store
	}{
		{"badger/nosync/sessions=64", 64, benchBadger(false, false)},
		{"badger/sync/sessions=64", 64, benchBadger(true, false)},
		{"badger/nosync/sessions=1", 1, benchBadger(false, false)},
		{"badger/sync/sessions=1", 1, benchBadger(true, false)},
		{"badger_small/sync/sessions=64", 64, benchBadger(true, true)},
		{"memory/sessions=64", 64, func(*testing.B) cachestore.Store { return cachestore.NewMemory() }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := bc.open(b)
			b.ReportAllocs()
			b.ResetTimer()
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			var failed atomic.Value
			for i := range bc.sessions {
				wg.Go(func() {
					id := fmt.Sprintf("bench-%d", i)
					ctx := context.Background()
					for turn := int64(1); left.Add(-1) >= 0; turn++ {
						rec := &messages.TurnRecord{Turn: turn, Run: benchTurn.Run, Provider: benchTurn.Provider,
							Assistant: benchTurn.Assistant, ToolMessages: benchTurn.ToolMessages}
						if err := s.CommitTurn(ctx, &cachestore.TurnCommit{Session: id, Record: rec}); err != nil {
							failed.Store(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N*benchMessagesPerTurn)/b.Elapsed().Seconds(), "msgs/s")
			if bs, ok := s.(*Store); ok {
				if n := bs.stats.batches.Load(); n > 0 {
					b.ReportMetric(float64(bs.stats.ops.Load())/float64(n), "turns/batch")
				}
			}
		})
	}
}

func benchBadger(syncWrites, small bool) func(b *testing.B) cachestore.Store {
	return func(b *testing.B) cachestore.Store {
		opts := Options{Dir: b.TempDir(), SyncWrites: syncWrites, Small: small}
		return mustOpen(b, opts)
	}
}
