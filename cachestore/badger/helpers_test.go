package badger

import "testing"

// mustOpen opens a store for a test and closes it when the test ends. The
// other helpers of the package's tests are cachestore/storetest's, which
// the Store contract (contract_test.go) runs with.
func mustOpen(t testing.TB, opts Options) *Store {
	t.Helper()
	b, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}
