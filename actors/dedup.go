package actors

import (
	"path"
	"strings"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// mutation describes a successful (or approved, in pass 1) call that is not
// read-only: what it invalidates.
type mutation struct {
	paths    []string
	anyPaths bool // the tool declares no paths: treat every path as touched
}

func mutationOf(p *callPlan) mutation {
	if p.tool.Paths == nil {
		return mutation{anyPaths: true}
	}
	return mutation{paths: p.tool.Paths(p.args)}
}

// invalidates reports whether a mutation makes a de-duplication entry stale
// (SPEC section 6): entries of find_files and run_command always; entries
// whose paths overlap the mutated paths (a mutation without declared paths
// overlaps every path).
func (m mutation) invalidates(e *cachestore.DedupEntry) bool {
	if e.StaleOnMutation {
		return true
	}
	if len(e.Paths) == 0 {
		return false
	}
	if m.anyPaths {
		return true
	}
	for _, a := range e.Paths {
		for _, b := range m.paths {
			if pathsOverlap(a, b) {
				return true
			}
		}
	}
	return false
}

// pathsOverlap: equal after cleaning, or one is a directory holding the other.
func pathsOverlap(a, b string) bool {
	a, b = path.Clean("/"+a), path.Clean("/"+b)
	if a == b || a == "/" || b == "/" {
		return true
	}
	return strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

func dedupEntry(p *callPlan, content string) *cachestore.DedupEntry {
	e := &cachestore.DedupEntry{Key: p.dedupKey, Tool: p.name, Content: content, StaleOnMutation: p.tool.StaleOnMutation, Stamp: p.stamp}
	if p.tool.Paths != nil {
		e.Paths = p.tool.Paths(p.args)
	}
	return e
}

// dedupChanges walks the executed calls in call order and returns the
// entries to add and the keys to delete in the run's table.
func (a *turnActor) dedupChanges(msgs []*messages.ToolMessage) (put []*cachestore.DedupEntry, del []string) {
	puts := make(map[string]*cachestore.DedupEntry, len(a.plans))
	order := make([]string, 0, len(a.plans))
	dels := map[string]bool{}
	for _, p := range a.plans {
		if p.decided != nil || p.dupOf >= 0 || p.tool == nil || p.dedupKey == "" {
			continue
		}
		m := msgs[p.idx]
		if toolkit.Status(m.Status) != toolkit.StatusOK || m.Injected != "" {
			continue
		}
		if !p.readOnly {
			mut := mutationOf(p)
			for k, e := range a.runState.Dedup {
				if !dels[k] && mut.invalidates(e) {
					dels[k] = true
				}
			}
			for k, e := range puts {
				if mut.invalidates(e) {
					delete(puts, k)
					dels[k] = true
				}
			}
		}
		if _, ok := puts[p.dedupKey]; !ok {
			order = append(order, p.dedupKey)
		}
		puts[p.dedupKey] = dedupEntry(p, m.Content)
		delete(dels, p.dedupKey)
	}
	if len(order) > 0 {
		put = make([]*cachestore.DedupEntry, 0, len(order))
	}
	for _, k := range order {
		if e, ok := puts[k]; ok {
			put = append(put, e)
		}
	}
	for k := range dels {
		del = append(del, k)
	}
	return put, del
}
