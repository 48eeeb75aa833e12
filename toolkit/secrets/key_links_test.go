package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/cachestore"
)

// TestKeyFileWithOtherLinksRefused: a key file with a second name (a hard
// link made where tools or commands can read, e.g. in the workspace) is
// refused, naming the file and its link count; with the link gone it opens
// again.
func TestKeyFileWithOtherLinksRefused(t *testing.T) {
	t.Setenv(EnvKey, "")
	keyFile := filepath.Join(t.TempDir(), "data", "secret.key")
	openWithKeyFile(t, cachestore.NewMemory(), keyFile, nil)
	link := filepath.Join(t.TempDir(), "workspace-copy")
	if err := os.Link(keyFile, link); err != nil {
		t.Fatal(err)
	}
	_, err := Open(cachestore.NewMemory(), keyFile, zerolog.Nop())
	if err == nil {
		t.Fatalf("Open with a key file of 2 links succeeded")
	}
	if !errors.Is(err, ErrKeyFileLinks) {
		t.Errorf("error %v is not ErrKeyFileLinks", err)
	}
	for _, want := range []string{keyFile, "2 links"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	openWithKeyFile(t, cachestore.NewMemory(), keyFile, nil)
}

// TestKeyFileCreatedOnceByConcurrentOpens: processes starting together on
// a fresh data directory all get the one key file, and none of them sees
// it with a second link while it is being made.
func TestKeyFileCreatedOnceByConcurrentOpens(t *testing.T) {
	t.Setenv(EnvKey, "")
	keyFile := filepath.Join(t.TempDir(), "data", "secret.key")
	const openers = 16
	var wg sync.WaitGroup
	errs := make([]error, openers)
	for i := range openers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = Open(cachestore.NewMemory(), keyFile, zerolog.Nop())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("opener %d: %v", i, err)
		}
	}
	fi, err := os.Stat(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if n := fi.Sys().(*syscall.Stat_t).Nlink; n != 1 {
		t.Fatalf("the key file has %d links", n)
	}
}
