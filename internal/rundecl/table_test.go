package rundecl

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/tooldispatch/tooldispatch/messages"
)

// TestMergeKeepsWhatATurnLeavesOut: a field a turn leaves out is the run's;
// a field it sends, even empty, replaces the run's; other runs and sessions
// keep their own.
func TestMergeKeepsWhatATurnLeavesOut(t *testing.T) {
	var tab Table
	k := Key{"s", "r"}
	tools := []*messages.ToolSpec{{Name: "pick"}}
	tab.Put(k, tab.Merge(k, tools, true, []string{"run_command"}, true))

	got := tab.Merge(k, nil, false, nil, false)
	if len(got.ClientTools) != 1 || got.ClientTools[0].GetName() != "pick" || !slices.Equal(got.Exclude, []string{"run_command"}) {
		t.Errorf("a turn that declares nothing: %+v, want the run's declaration", got)
	}
	got = tab.Merge(k, nil, true, []string{}, true)
	if len(got.ClientTools) != 0 || len(got.Exclude) != 0 {
		t.Errorf("a turn that declares both empty: %+v, want nothing", got)
	}
	got = tab.Merge(k, nil, false, []string{"fetch_page"}, true)
	if len(got.ClientTools) != 1 || !slices.Equal(got.Exclude, []string{"fetch_page"}) {
		t.Errorf("a turn that declares exclude only: %+v, want the run's client tools and its own exclude", got)
	}
	for _, other := range []Key{{"s", "other"}, {"t", "r"}} {
		if d := tab.Get(other); len(d.ClientTools) != 0 || len(d.Exclude) != 0 {
			t.Errorf("%+v has the declaration of %+v: %+v", other, k, d)
		}
	}
	tab.Put(k, Decl{})
	if tab.Len() != 0 {
		t.Errorf("an empty declaration is kept: %d runs", tab.Len())
	}
	tab.Put(k, Decl{Exclude: []string{"x"}})
	tab.Drop(k)
	if d := tab.Get(k); len(d.Exclude) != 0 {
		t.Errorf("a dropped run still declares %+v", d)
	}
}

// TestLimitForgetsTheLeastRecentlyPut: past Limit, the run put longest ago
// is forgotten, not one put again since.
func TestLimitForgetsTheLeastRecentlyPut(t *testing.T) {
	tab := Table{Limit: 3}
	d := Decl{Exclude: []string{"x"}}
	for i := range 3 {
		tab.Put(Key{"s", fmt.Sprint(i)}, d)
	}
	tab.Put(Key{"s", "0"}, d) // 1 is now the oldest
	tab.Put(Key{"s", "3"}, d)
	if tab.Len() != 3 {
		t.Fatalf("%d runs kept, want 3", tab.Len())
	}
	for run, want := range map[string]bool{"0": true, "1": false, "2": true, "3": true} {
		if got := len(tab.Get(Key{"s", run}).Exclude) != 0; got != want {
			t.Errorf("run %s kept: %v, want %v", run, got, want)
		}
	}
}

// TestConcurrentUse: puts, merges and drops from many goroutines (run with
// -race).
func TestConcurrentUse(t *testing.T) {
	tab := Table{Limit: 8}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				k := Key{"s", fmt.Sprint((g + i) % 16)}
				tab.Put(k, tab.Merge(k, nil, false, []string{"x"}, true))
				if i%7 == 0 {
					tab.Drop(k)
				}
			}
		})
	}
	wg.Wait()
	if n := tab.Len(); n > 8 {
		t.Errorf("%d runs kept, limit 8", n)
	}
}
