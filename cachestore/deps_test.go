package cachestore_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreLinksNoStoreDriver: the store interfaces, Memory and the
// dispatcher that persists through them link no storage engine. A program
// picks Badger (cachestore/badger) or PostgreSQL (cachestore/postgres) by
// importing it; one that embeds the dispatcher over its own store links
// neither.
func TestCoreLinksNoStoreDriver(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	drivers := []string{"github.com/dgraph-io/badger", "github.com/jackc/pgx"}
	for _, pkg := range []string{
		"github.com/tooldispatch/tooldispatch/cachestore",
		"github.com/tooldispatch/tooldispatch/cachestore/storetest",
		"github.com/tooldispatch/tooldispatch/cachestore/seam",
		"github.com/tooldispatch/tooldispatch/cachestore/faults",
		"github.com/tooldispatch/tooldispatch/cachestore/space",
		"github.com/tooldispatch/tooldispatch/actors",
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		var linked []string
		for _, dep := range strings.Fields(string(out)) {
			for _, d := range drivers {
				if strings.HasPrefix(dep, d) {
					linked = append(linked, dep)
				}
			}
		}
		if len(linked) > 0 {
			t.Errorf("%s links %d packages of store drivers: %s", pkg, len(linked), strings.Join(linked, " "))
		}
	}
}
