package badger_test

import (
	"testing"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
)

// The Store contract (cachestore/storetest) against Badger on disk and
// Badger in memory; cachestore runs it against Memory, cachestore/postgres
// against PostgreSQL.

func openBadger(t *testing.T, dir string) *badger.Store {
	t.Helper()
	b, err := badger.Open(badger.TestOptions(dir))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// badgerOnDisk restarts by closing and reopening its directory, which
// recovers intents.
func badgerOnDisk(t *testing.T) (cachestore.Store, func() cachestore.Store) {
	dir := t.TempDir()
	s := openBadger(t, dir)
	return s, func() cachestore.Store {
		t.Helper()
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		s = openBadger(t, dir)
		return s
	}
}

func badgerInMemory(t *testing.T) (cachestore.Store, func() cachestore.Store) {
	return storetest.RecoverOnRestart(t, openBadger(t, ""))
}

// badgerSyncWrites fsyncs every commit, so that concurrent sessions'
// commits queue behind each other and the committer merges them.
func badgerSyncWrites(t *testing.T) (cachestore.Store, func() cachestore.Store) {
	opts := badger.TestOptions(t.TempDir())
	opts.SyncWrites = true
	b, err := badger.Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return storetest.RecoverOnRestart(t, b)
}

func TestContract(t *testing.T) {
	t.Run("badger", func(t *testing.T) { storetest.Run(t, badgerOnDisk) })
	t.Run("badger_sync_writes", func(t *testing.T) { storetest.Run(t, badgerSyncWrites) })
	t.Run("badger_in_memory", func(t *testing.T) { storetest.Run(t, badgerInMemory) })
}

// TestBigTurnsCommit: Badger on disk takes turns at the dispatcher's
// limits. Badger in memory cannot (a transaction of it is limited to 15 %
// of its memtable); TestBadgerTooBigErrorCarriesNoBytes checks how it
// refuses.
func TestBigTurnsCommit(t *testing.T) {
	t.Run("badger", func(t *testing.T) { storetest.RunBig(t, badgerOnDisk) })
}
