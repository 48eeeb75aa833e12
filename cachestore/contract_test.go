package cachestore_test

import (
	"context"
	"testing"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
)

// The Store contract (cachestore/storetest) against Badger on disk, Badger
// in memory and Memory; cachestore/postgres runs it against PostgreSQL.

func openBadger(t *testing.T, dir string) *cachestore.Badger {
	t.Helper()
	b, err := cachestore.OpenBadger(cachestore.TestOptions(dir))
	if err != nil {
		t.Fatalf("OpenBadger: %v", err)
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

// recoverOnRestart is the restart of a store without files: RecoverAll.
func recoverOnRestart(t *testing.T, s cachestore.Store) (cachestore.Store, func() cachestore.Store) {
	t.Cleanup(func() { _ = s.Close() })
	return s, func() cachestore.Store {
		t.Helper()
		if _, err := s.RecoverAll(context.Background()); err != nil {
			t.Fatalf("RecoverAll: %v", err)
		}
		return s
	}
}

func badgerInMemory(t *testing.T) (cachestore.Store, func() cachestore.Store) {
	return recoverOnRestart(t, openBadger(t, ""))
}

func memory(t *testing.T) (cachestore.Store, func() cachestore.Store) {
	return recoverOnRestart(t, cachestore.NewMemory())
}

// badgerSyncWrites fsyncs every commit, so that concurrent sessions'
// commits queue behind each other and the committer merges them.
func badgerSyncWrites(t *testing.T) (cachestore.Store, func() cachestore.Store) {
	opts := cachestore.TestOptions(t.TempDir())
	opts.SyncWrites = true
	b, err := cachestore.OpenBadger(opts)
	if err != nil {
		t.Fatalf("OpenBadger: %v", err)
	}
	return recoverOnRestart(t, b)
}

func TestContract(t *testing.T) {
	t.Run("badger", func(t *testing.T) { storetest.Run(t, badgerOnDisk) })
	t.Run("badger_sync_writes", func(t *testing.T) { storetest.Run(t, badgerSyncWrites) })
	t.Run("badger_in_memory", func(t *testing.T) { storetest.Run(t, badgerInMemory) })
	t.Run("memory", func(t *testing.T) { storetest.Run(t, memory) })
}

// TestBigTurnsCommit: the stores that must take turns at the dispatcher's
// limits. Badger in memory cannot (a transaction of it is limited to 15 %
// of its memtable); TestBadgerTooBigErrorCarriesNoBytes checks how it
// refuses.
func TestBigTurnsCommit(t *testing.T) {
	t.Run("badger", func(t *testing.T) { storetest.RunBig(t, badgerOnDisk) })
	t.Run("memory", func(t *testing.T) { storetest.RunBig(t, memory) })
}
