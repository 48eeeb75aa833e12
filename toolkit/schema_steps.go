package toolkit

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"unsafe"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// maxSchemaSteps bounds the (sub)schema evaluations one check may make.
//
// The validator evaluates every branch of allOf, anyOf and oneOf, both of
// if/then/else, and each $ref anew, remembering nothing: a schema whose
// branches recurse into the same value costs 2^depth evaluations (the model
// picks the depth, up to the argument limit's 64), and a chain of
// definitions that each apply the next twice costs 2^length for any
// arguments. Neither observes a context. So, before validating, Check
// counts an upper bound of the evaluations the validator would make —
// remembering the count of each (schema, value) pair a schema reached by
// two ways is applied to, so counting is linear in the pairs — and refuses
// the arguments past this bound without validating them. A linear schema
// needs about ten evaluations per value of the arguments; the bound is a
// few seconds of the validator's time.
const maxSchemaSteps = 1 << 20

// maxTurnSchemaSteps bounds the evaluations of every check of one turn
// together (MatchBudget), so that many calls cannot add up to hours.
const maxTurnSchemaSteps = 4 << 20

// stepGraph is what counting needs to know of one compiled schema: which
// subschemas are reached by more than one edge (their counts are
// remembered), the types each allows, and the candidates of dynamic
// references.
type stepGraph struct {
	shared    map[*jsonschema.Schema]bool
	types     map[*jsonschema.Schema]uint8
	recursive []*jsonschema.Schema            // schemas with $recursiveAnchor
	dynamic   map[string][]*jsonschema.Schema // $dynamicAnchor name → schemas
	// lost: an anchored object did not compile on its own, so a dynamic
	// reference may reach a schema not walked: counted as over the bound.
	lost bool
}

// newStepGraph walks every schema reachable from roots.
func newStepGraph(roots []*jsonschema.Schema, lost bool) *stepGraph {
	g := &stepGraph{
		lost:    lost,
		shared:  map[*jsonschema.Schema]bool{},
		types:   map[*jsonschema.Schema]uint8{},
		dynamic: map[string][]*jsonschema.Schema{},
	}
	seen := map[*jsonschema.Schema]bool{}
	var stack []*jsonschema.Schema
	edge := func(s *jsonschema.Schema) {
		if s == nil {
			return
		}
		if seen[s] {
			g.shared[s] = true
			return
		}
		seen[s] = true
		stack = append(stack, s)
	}
	for _, r := range roots {
		// A root is entered from outside: one more edge makes it shared
		// once anything refers to it.
		seen[r] = true
		stack = append(stack, r)
	}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if s.Types != nil && !s.Types.IsEmpty() {
			var mask uint8
			for _, name := range s.Types.ToStrings() {
				mask |= fastTypes[name]
			}
			g.types[s] = mask
		}
		if s.RecursiveAnchor {
			g.recursive = append(g.recursive, s)
		}
		if s.DynamicAnchor != "" {
			g.dynamic[s.DynamicAnchor] = append(g.dynamic[s.DynamicAnchor], s)
		}
		eachSubschema(s, edge)
	}
	return g
}

// eachSubschema calls f with every subschema s refers to (nil ones too).
func eachSubschema(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	f(s.Ref)
	f(s.RecursiveRef)
	if s.DynamicRef != nil {
		f(s.DynamicRef.Ref)
	}
	f(s.Not)
	for _, x := range s.AllOf {
		f(x)
	}
	for _, x := range s.AnyOf {
		f(x)
	}
	for _, x := range s.OneOf {
		f(x)
	}
	f(s.If)
	f(s.Then)
	f(s.Else)
	f(s.PropertyNames)
	for _, x := range s.Properties {
		f(x)
	}
	for _, x := range s.PatternProperties {
		f(x)
	}
	if x, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
		f(x)
	}
	for _, d := range s.Dependencies {
		if x, ok := d.(*jsonschema.Schema); ok {
			f(x)
		}
	}
	for _, x := range s.DependentSchemas {
		f(x)
	}
	f(s.UnevaluatedProperties)
	f(s.Contains)
	switch items := s.Items.(type) {
	case *jsonschema.Schema:
		f(items)
	case []*jsonschema.Schema:
		for _, x := range items {
			f(x)
		}
	}
	if x, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
		f(x)
	}
	for _, x := range s.PrefixItems {
		f(x)
	}
	f(s.Items2020)
	f(s.UnevaluatedItems)
	f(s.ContentSchema)
}

// anchorPointers returns the JSON pointers of the objects in doc that carry
// a dynamic or recursive anchor: the validator may jump to them though no
// keyword refers to them. Objects inside `enum`, `const` or a property name
// may be listed too; compiling them is harmless.
func anchorPointers(doc any) []string {
	var out []string
	var walk func(v any, ptr string)
	walk = func(v any, ptr string) {
		switch d := v.(type) {
		case map[string]any:
			if _, ok := d["$dynamicAnchor"]; ok {
				out = append(out, ptr)
			} else if _, ok := d["$recursiveAnchor"]; ok {
				out = append(out, ptr)
			}
			for k, x := range d {
				walk(x, ptr+"/"+url.PathEscape(escapePointer(k)))
			}
		case []any:
			for i, x := range d {
				walk(x, fmt.Sprintf("%s/%d", ptr, i))
			}
		}
	}
	walk(doc, "")
	return out
}

// stepKey names one (schema, value) pair: containers by identity, scalars
// by type (nothing else of a scalar changes what is evaluated).
type stepKey struct {
	s   *jsonschema.Schema
	ptr unsafe.Pointer
	n   int
}

// stepCounter counts the evaluations of one check.
type stepCounter struct {
	g     *stepGraph
	memo  map[stepKey]int64 // -1 while the pair is being counted
	total int64             // evaluations counted so far, capped at maxSchemaSteps+1
}

// takeSteps counts the evaluations validating v with s (compiled with
// graph g) may take and takes them from the turn's budget (nil: none). It
// returns the refusal when they are more than one call or the turn's
// budget may take.
func takeSteps(g *stepGraph, s *jsonschema.Schema, v any, turn *MatchBudget) *ValidationError {
	c := &stepCounter{g: g, memo: map[stepKey]int64{}}
	n := c.count(s, v)
	if n > maxSchemaSteps {
		return stepsRefusal("the tool's schema would take more than %d steps to check them", maxSchemaSteps)
	}
	if turn != nil && turn.steps.Add(-n) < 0 {
		turn.steps.Add(n)
		return stepsRefusal("the calls of this turn would take more than %d steps together to check", maxTurnSchemaSteps)
	}
	return nil
}

const stepsOver = maxSchemaSteps + 1

// add sums counts, capped just past the bound.
func add(a, b int64) int64 { return min(a+b, stepsOver) }

func keyOf(s *jsonschema.Schema, v any) stepKey {
	switch v := v.(type) {
	case map[string]any:
		return stepKey{s: s, ptr: reflect.ValueOf(v).UnsafePointer()}
	case []any:
		return stepKey{s: s, ptr: unsafe.Pointer(unsafe.SliceData(v)), n: len(v)}
	case string:
		return stepKey{s: s, n: -1}
	case bool:
		return stepKey{s: s, n: -2}
	case nil:
		return stepKey{s: s, n: -3}
	}
	return stepKey{s: s, n: -4}
}

// count returns the evaluations validating v with s may take (at most
// stepsOver).
func (c *stepCounter) count(s *jsonschema.Schema, v any) int64 {
	if c.total > maxSchemaSteps {
		return stepsOver
	}
	if !c.g.shared[s] {
		return c.evaluate(s, v)
	}
	key := keyOf(s, v)
	if n, ok := c.memo[key]; ok {
		if n < 0 {
			// The pair applies itself to the same value: the validator
			// stops such a cycle at once.
			return 1
		}
		return n
	}
	c.memo[key] = -1
	n := c.evaluate(s, v)
	c.memo[key] = n
	return n
}

// evaluate mirrors the validator's walk of one schema over one value,
// taking every keyword that may apply as applying (an early failure of
// const, enum or format, a branch not needed, is not assumed).
func (c *stepCounter) evaluate(s *jsonschema.Schema, v any) int64 {
	c.total = add(c.total, 1)
	n := int64(1)
	if s.Bool != nil {
		return n
	}
	if mask, ok := c.g.types[s]; ok && !typeMaybe(mask, v) {
		return n
	}
	if s.Ref != nil {
		n = add(n, c.count(s.Ref, v))
		if s.DraftVersion < 2019 {
			return n
		}
	}
	switch v := v.(type) {
	case map[string]any:
		n = add(n, c.object(s, v))
	case []any:
		n = add(n, c.array(s, v))
	}
	if s.DraftVersion >= 2019 {
		if r := s.RecursiveRef; r != nil {
			cands := []*jsonschema.Schema{r}
			if r.RecursiveAnchor {
				if c.g.lost {
					return stepsOver
				}
				cands = append(cands, c.g.recursive...)
			}
			n = add(n, c.most(cands, v))
		}
		if d := s.DynamicRef; d != nil {
			cands := []*jsonschema.Schema{d.Ref}
			if d.Anchor != "" && d.Ref.DynamicAnchor == d.Anchor {
				if c.g.lost {
					return stepsOver
				}
				cands = append(cands, c.g.dynamic[d.Anchor]...)
			}
			n = add(n, c.most(cands, v))
		}
	}
	for _, x := range []*jsonschema.Schema{s.Not, s.If, s.Then, s.Else} {
		if x != nil {
			n = add(n, c.count(x, v))
		}
	}
	for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf} {
		for _, x := range list {
			n = add(n, c.count(x, v))
		}
	}
	return n
}

// most is the largest count among the schemas a dynamic reference may
// resolve to.
func (c *stepCounter) most(cands []*jsonschema.Schema, v any) int64 {
	var n int64
	for _, x := range cands {
		n = max(n, c.count(x, v))
	}
	return n
}

func (c *stepCounter) object(s *jsonschema.Schema, obj map[string]any) int64 {
	var n int64
	for name, d := range s.Dependencies {
		if x, ok := d.(*jsonschema.Schema); ok {
			if _, has := obj[name]; has {
				n = add(n, c.count(x, obj))
			}
		}
	}
	for name, x := range s.DependentSchemas {
		if _, has := obj[name]; has {
			n = add(n, c.count(x, obj))
		}
	}
	addl, _ := s.AdditionalProperties.(*jsonschema.Schema)
	for name, pv := range obj {
		matched := false
		if x, ok := s.Properties[name]; ok {
			matched = true
			n = add(n, c.count(x, pv))
		}
		for re, x := range s.PatternProperties {
			// The match is the validator's own (bounded, and remembered
			// for the validation that follows).
			if re.MatchString(name) {
				matched = true
				n = add(n, c.count(x, pv))
			}
		}
		if !matched && addl != nil {
			n = add(n, c.count(addl, pv))
		}
		if s.PropertyNames != nil {
			n = add(n, c.count(s.PropertyNames, name))
		}
		if s.UnevaluatedProperties != nil {
			n = add(n, c.count(s.UnevaluatedProperties, pv))
		}
		if n > maxSchemaSteps {
			return n
		}
	}
	return n
}

func (c *stepCounter) array(s *jsonschema.Schema, arr []any) int64 {
	var n int64
	each := func(x *jsonschema.Schema, items []any) {
		for _, item := range items {
			if n > maxSchemaSteps {
				return
			}
			n = add(n, c.count(x, item))
		}
	}
	if s.DraftVersion < 2020 {
		evaluated := 0
		switch items := s.Items.(type) {
		case *jsonschema.Schema:
			each(items, arr)
			evaluated = len(arr)
		case []*jsonschema.Schema:
			evaluated = min(len(arr), len(items))
			for i := range evaluated {
				n = add(n, c.count(items[i], arr[i]))
			}
		}
		if x, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
			each(x, arr[evaluated:])
		}
	} else {
		evaluated := min(len(arr), len(s.PrefixItems))
		for i := range evaluated {
			n = add(n, c.count(s.PrefixItems[i], arr[i]))
		}
		if s.Items2020 != nil {
			each(s.Items2020, arr[evaluated:])
		}
	}
	if s.Contains != nil {
		each(s.Contains, arr)
	}
	if s.UnevaluatedItems != nil {
		each(s.UnevaluatedItems, arr)
	}
	return n
}

// typeMaybe reports whether v may be of one of the types in mask (a number
// that is not written as an integer may still be one: 1.0).
func typeMaybe(mask uint8, v any) bool {
	switch v.(type) {
	case map[string]any:
		return mask&typeObject != 0
	case []any:
		return mask&typeArray != 0
	case string:
		return mask&typeString != 0
	case bool:
		return mask&typeBoolean != 0
	case nil:
		return mask&typeNull != 0
	case json.Number, float32, float64, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return mask&(typeNumber|typeInteger) != 0
	}
	return true
}

// stepsRefusal is the ValidationError of arguments whose check would take
// more evaluations than a budget allows.
func stepsRefusal(format string, args ...any) *ValidationError {
	return &ValidationError{steps: true, Fields: []FieldError{{Message: "arguments: " + fmt.Sprintf(format, args...) +
		" (the schema applies the same parts to the same values again and again); send fewer or less deeply nested values"}}}
}
