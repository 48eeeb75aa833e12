package service

import (
	"sync"

	"github.com/tooldispatch/tooldispatch/messages"
)

// maxRunDecls bounds how many runs' declarations the server keeps.
const maxRunDecls = 4096

// defaultRun is the run of a turn that names none (the dispatcher's default).
const defaultRun = "default"

// runKey names a run of a session.
type runKey struct{ session, run string }

// runDecl is what a run declared in an earlier turn: its client tools and
// the tools it excludes. A turn that leaves a field out keeps the run's
// declaration, as the run command does.
type runDecl struct {
	clientTools []*messages.ToolSpec
	exclude     []string
	tick        uint64
}

// runDecls keeps the declarations of recent runs, for later turns of the
// run and for GET /v1/tools. Safe for concurrent use.
type runDecls struct {
	mu   sync.Mutex
	m    map[runKey]*runDecl // guarded by mu
	tick uint64              // guarded by mu
}

// merge returns the run's declaration with the fields a turn declared
// (nil: not declared) put over it.
func (d *runDecls) merge(k runKey, clientTools []*messages.ToolSpec, hasClient bool, exclude []string, hasExclude bool) runDecl {
	out := d.get(k)
	if hasClient {
		out.clientTools = clientTools
	}
	if hasExclude {
		out.exclude = exclude
	}
	return out
}

// get returns the run's declaration (empty when it has none).
func (d *runDecls) get(k runKey) runDecl {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.m[k]; ok {
		return *r
	}
	return runDecl{}
}

// put stores a run's declaration; an empty one is forgotten.
func (d *runDecls) put(k runKey, r runDecl) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(r.clientTools) == 0 && len(r.exclude) == 0 {
		delete(d.m, k)
		return
	}
	if d.m == nil {
		d.m = map[runKey]*runDecl{}
	}
	if _, ok := d.m[k]; !ok && len(d.m) >= maxRunDecls {
		d.evictLocked()
	}
	d.tick++
	r.tick = d.tick
	d.m[k] = &r
}

// drop forgets a run (it ended).
func (d *runDecls) drop(k runKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, k)
}

// evictLocked forgets the least recently declared run.
func (d *runDecls) evictLocked() {
	var oldest runKey
	var min uint64
	for k, r := range d.m {
		if min == 0 || r.tick < min {
			oldest, min = k, r.tick
		}
	}
	delete(d.m, oldest)
}
