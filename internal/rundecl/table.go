package rundecl

import (
	"sync"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Key names a run of a session.
type Key struct{ Session, Run string }

// Decl is what a run declared: its client tools and the tools it excludes.
type Decl struct {
	ClientTools []*messages.ToolSpec
	Exclude     []string
}

// empty reports whether d declares nothing.
func (d Decl) empty() bool { return len(d.ClientTools) == 0 && len(d.Exclude) == 0 }

// entry is a run's declaration and when it was last put.
type entry struct {
	decl Decl
	tick uint64
}

// Table keeps the declarations of runs, at most Limit of them: putting one
// more forgets the least recently put. Safe for concurrent use; the zero
// value keeps any number.
type Table struct {
	// Limit bounds how many runs' declarations are kept (0: no bound). Set
	// it before the first Put.
	Limit int

	mu   sync.Mutex
	m    map[Key]*entry // guarded by mu
	tick uint64         // guarded by mu
}

// Merge returns the run's declaration with the fields a turn declared put
// over it: clientTools when hasClient, exclude when hasExclude. It stores
// nothing (see Put).
func (t *Table) Merge(k Key, clientTools []*messages.ToolSpec, hasClient bool, exclude []string, hasExclude bool) Decl {
	out := t.Get(k)
	if hasClient {
		out.ClientTools = clientTools
	}
	if hasExclude {
		out.Exclude = exclude
	}
	return out
}

// Get returns the run's declaration (empty when it has none).
func (t *Table) Get(k Key) Decl {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.m[k]; ok {
		return e.decl
	}
	return Decl{}
}

// Put stores a run's declaration; an empty one is forgotten.
func (t *Table) Put(k Key, d Decl) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d.empty() {
		delete(t.m, k)
		return
	}
	if t.m == nil {
		t.m = map[Key]*entry{}
	}
	if _, ok := t.m[k]; !ok && t.Limit > 0 && len(t.m) >= t.Limit {
		t.evictLocked()
	}
	t.tick++
	t.m[k] = &entry{decl: d, tick: t.tick}
}

// Drop forgets a run (it ended).
func (t *Table) Drop(k Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, k)
}

// Len returns how many runs' declarations are kept.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// evictLocked forgets the least recently put run.
func (t *Table) evictLocked() {
	var oldest Key
	var least uint64
	for k, e := range t.m {
		if least == 0 || e.tick < least {
			oldest, least = k, e.tick
		}
	}
	delete(t.m, oldest)
}
