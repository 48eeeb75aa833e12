package cachestore_test

import (
	"testing"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/storetest"
)

// The Store contract (cachestore/storetest) against Memory; cachestore/badger
// runs it against Badger, cachestore/postgres against PostgreSQL.

func memory(t *testing.T) (cachestore.Store, func() cachestore.Store) {
	return storetest.RecoverOnRestart(t, cachestore.NewMemory())
}

func TestContract(t *testing.T) {
	t.Run("memory", func(t *testing.T) { storetest.Run(t, memory) })
}

// TestBigTurnsCommit: Memory takes turns at the dispatcher's limits.
func TestBigTurnsCommit(t *testing.T) {
	t.Run("memory", func(t *testing.T) { storetest.RunBig(t, memory) })
}
