package badger

// The store's primitives, one benchmark each, for the cost model of
// docs/PERFORMANCE.md ("What a turn costs"):
//
//	go test -run XXX -bench 'Prim' -count 6 ./cachestore/badger

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
	"github.com/tooldispatch/tooldispatch/messages"
)

// BenchmarkPrimBadgerTxn: one Badger transaction of n keys of 200 bytes,
// committed, with the Small options `run`, `serve` and the bench open;
// without and with SyncWrites (an fsync per commit).
func BenchmarkPrimBadgerTxn(b *testing.B) {
	val := make([]byte, 200)
	for _, sync := range []bool{false, true} {
		for _, n := range []int{1, 2, 100} {
			name := "keys=" + strconv.Itoa(n)
			if sync {
				name += "/fsync"
			}
			b.Run(name, func(b *testing.B) {
				s := mustOpen(b, Options{Dir: b.TempDir(), SyncWrites: sync, Small: true})
				keys := make([][]byte, n)
				for i := range keys {
					keys[i] = []byte("v1/bench/" + strconv.Itoa(i))
				}
				b.ReportAllocs()
				for b.Loop() {
					txn := s.db.NewTransaction(true)
					for _, k := range keys {
						if err := txn.SetEntry(badgerdb.NewEntry(k, val)); err != nil {
							b.Fatal(err)
						}
					}
					if err := txn.Commit(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
			})
		}
	}
}

// BenchmarkPrimFsync: a 200-byte write and an fsync of a file on the data
// directory's file system.
func BenchmarkPrimFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "f"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	val := make([]byte, 200)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Write(val); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrimStoreWrite: the store's writes of a turn through its group
// committer, one session at a time (no batching with others): an intent
// of a one-call turn, the commit of a one-call turn with its de-dup entry,
// and a 100-call turn's of both. Against BenchmarkPrimBadgerTxn it shows
// what encoding, the committer's hand-offs and the keys add.
func BenchmarkPrimStoreWrite(b *testing.B) {
	for _, n := range []int{1, 100} {
		rec := storetest.Record(1, "r", "", n)
		calls := "calls=" + strconv.Itoa(n)
		b.Run("intent/"+calls, func(b *testing.B) {
			s := mustOpen(b, Options{Dir: b.TempDir(), Small: true})
			in := &cachestore.Intent{Session: "s", Turn: 1, Run: "r", Assistant: rec.Assistant, Decided: map[int]*messages.ToolMessage{},
				Names: make([]string, n), IDs: make([]string, n)}
			for i := range n {
				in.Names[i], in.IDs[i] = "noop", "c"+strconv.Itoa(i)
				in.Started = append(in.Started, i)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := s.WriteIntent(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("commit/"+calls, func(b *testing.B) {
			s := mustOpen(b, Options{Dir: b.TempDir(), Small: true})
			ctx := context.Background()
			turn := int64(1)
			b.ReportAllocs()
			for b.Loop() {
				r := &messages.TurnRecord{Turn: turn, Run: rec.Run, Assistant: rec.Assistant, ToolMessages: rec.ToolMessages, TimeUnixNano: 1}
				c := &cachestore.TurnCommit{Session: "s", Record: r}
				for i := range n {
					c.DedupPut = append(c.DedupPut, &cachestore.DedupEntry{Key: strconv.FormatInt(turn, 10) + "/" + strconv.Itoa(i), Tool: "noop", Content: "ok"})
				}
				if err := s.CommitTurn(ctx, c); err != nil {
					b.Fatal(err)
				}
				turn++
			}
		})
	}
}
