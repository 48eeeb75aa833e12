package toolkit

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// validName is what a tool name may look like: the OpenAI function-name rule.
var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Registry holds the tools a dispatcher knows. Safe for concurrent use: MCP
// servers may add and remove tools while turns run.
type Registry struct {
	mu     sync.RWMutex
	tools  map[string]*Tool // guarded by mu
	sorted []*Tool          // guarded by mu; name order, rebuilt on change
	// Schemas compiles and caches argument schemas; immutable after NewRegistry.
	Schemas *SchemaCache
}

// NewRegistry returns an empty registry whose schema cache takes opts (the
// format policy, the pattern match bound).
func NewRegistry(opts ...SchemaOption) *Registry {
	return &Registry{tools: map[string]*Tool{}, Schemas: NewSchemaCache(opts...)}
}

// Register adds a tool. Registration mistakes (bad name, missing handler,
// duplicate, schema that does not compile) panic: they are programming errors
// found at start-up.
func (r *Registry) Register(t Tool) {
	if err := r.add(&t, false); err != nil {
		panic(err)
	}
}

// Replace adds or replaces a tool at run time (MCP list_changed) and returns
// an error instead of panicking.
func (r *Registry) Replace(t Tool) error { return r.add(&t, true) }

// ReplaceOrMark is Replace for tools described by someone else (an MCP
// server): a schema that does not compile does not drop the tool, it sets
// its SchemaError, so the tool stays visible with the reason.
func (r *Registry) ReplaceOrMark(t Tool) error {
	t.SchemaError = ""
	if len(t.Schema) > 0 {
		if _, err := r.Schemas.Compile(t.Schema); err != nil {
			t.SchemaError = SchemaErrorText(err)
		}
	}
	return r.add(&t, true)
}

// SchemaErrorText is a schema compile error on one line.
func SchemaErrorText(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

func (r *Registry) add(t *Tool, replace bool) error {
	if !validName.MatchString(t.Name) {
		return fmt.Errorf("toolkit: invalid tool name %q", t.Name)
	}
	if t.Handler == nil && t.Source != SourceClient {
		return fmt.Errorf("toolkit: tool %s has no handler", t.Name)
	}
	if (t.Preview == nil) != (t.FileState == nil) {
		return fmt.Errorf("toolkit: tool %s sets only one of Preview and FileState", t.Name)
	}
	if len(t.Schema) == 0 {
		t.Schema = []byte(`{"type":"object"}`)
	}
	if _, err := r.Schemas.Compile(t.Schema); err != nil && t.SchemaError == "" {
		return fmt.Errorf("toolkit: tool %s: %w", t.Name, err)
	}
	if t.Source == "" {
		t.Source = SourceBuiltin
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[t.Name]; dup && !replace {
		return fmt.Errorf("toolkit: tool %s registered twice", t.Name)
	}
	r.tools[t.Name] = t
	r.resort()
	return nil
}

// Remove deletes a tool (an MCP server dropped it).
func (r *Registry) Remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tools[name]; ok {
		delete(r.tools, name)
		r.resort()
	}
}

func (r *Registry) resort() {
	r.sorted = make([]*Tool, 0, len(r.tools))
	for _, t := range r.tools {
		r.sorted = append(r.sorted, t)
	}
	sort.Slice(r.sorted, func(i, j int) bool { return r.sorted[i].Name < r.sorted[j].Name })
}

// Lookup returns the tool registered under exactly name.
func (r *Registry) Lookup(name string) (*Tool, bool) {
	r.mu.RLock()
	t, ok := r.tools[name]
	r.mu.RUnlock()
	return t, ok
}

// All returns every registered tool in name order. The slice is shared: do
// not modify it.
func (r *Registry) All() []*Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.sorted
}

// Closest returns up to n names close to name, best first: same name under
// another case or separators, prefixes and substrings, then small edit
// distance.
func Closest(name string, candidates []string, n int) []string {
	key := foldName(name)
	type scored struct {
		name  string
		score int
	}
	var best []scored
	for _, c := range candidates {
		ck := foldName(c)
		var s int
		switch {
		case ck == key:
			s = 0
		case key != "" && (strings.Contains(ck, key) || strings.Contains(key, ck)):
			s = 1 + abs(len(ck)-len(key))/4
		default:
			d := levenshtein(key, ck)
			if d > max(2, len(key)/3) {
				continue
			}
			s = 2 + d
		}
		best = append(best, scored{c, s})
	}
	sort.SliceStable(best, func(i, j int) bool {
		if best[i].score != best[j].score {
			return best[i].score < best[j].score
		}
		return best[i].name < best[j].name
	})
	out := make([]string, 0, n)
	for i := 0; i < len(best) && i < n; i++ {
		out = append(out, best[i].name)
	}
	return out
}

func foldName(s string) string {
	s = strings.ToLower(s)
	return strings.NewReplacer("-", "", "_", "", " ", "", ".", "").Replace(s)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
