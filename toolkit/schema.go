package toolkit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// SchemaCache compiles JSON Schemas once and keeps them by content. Safe for
// concurrent use.
//
// A schema's `$schema` picks its draft (draft-07, which MCP servers send, and
// 2020-12 among others); without one, the cache's default draft applies
// (2020-12 unless WithDefaultDraft says otherwise). References to the
// official meta-schemas resolve from copies built into the library; every
// other URL goes to the cache's loader, which by default refuses them all:
// compiling never touches the network or the file system. Compiled schemas
// stay for the cache's lifetime.
//
// Pattern matching is bounded per match, per call and per turn (match.go).
type SchemaCache struct {
	loader       jsonschema.URLLoader
	draft        *jsonschema.Draft
	formats      FormatPolicy
	regexTimeout time.Duration
	callBudget   time.Duration
	turnBudget   time.Duration
	now          func() time.Time // measures matching; time.Now but in tests

	mu      sync.RWMutex
	entries map[string]*schemaEntry // guarded by mu; key: the schema text
}

type schemaEntry struct {
	get func() (*Schema, error) // sync.OnceValues: compiles on first call
}

// SchemaOption configures a SchemaCache.
type SchemaOption func(*SchemaCache)

// WithSchemaLoader makes the cache resolve `$ref`s to other documents with
// loader (for example a jsonschema.SchemeURLLoader over local copies)
// instead of refusing them.
func WithSchemaLoader(loader jsonschema.URLLoader) SchemaOption {
	return func(c *SchemaCache) {
		if loader != nil {
			c.loader = loader
		}
	}
}

// WithDefaultDraft sets the draft of schemas without `$schema`
// (jsonschema.Draft2020 unless set).
func WithDefaultDraft(d *jsonschema.Draft) SchemaOption {
	return func(c *SchemaCache) {
		if d != nil {
			c.draft = d
		}
	}
}

// WithFormatPolicy sets how `format` is treated (FormatAssert unless set).
func WithFormatPolicy(p FormatPolicy) SchemaOption {
	return func(c *SchemaCache) { c.formats = p }
}

// WithRegexTimeout bounds one match of a schema's pattern (200 ms unless
// set; d <= 0 keeps the default).
func WithRegexTimeout(d time.Duration) SchemaOption {
	return func(c *SchemaCache) {
		if d > 0 {
			c.regexTimeout = d
		}
	}
}

// WithMatchBudgets sets the time pattern matching may take for one call
// (1 s unless set) and for all the calls of one turn together (3 s unless
// set); a duration <= 0 keeps its default. Once a budget is spent nothing
// more is matched and the arguments are refused (invalid_args).
func WithMatchBudgets(call, turn time.Duration) SchemaOption {
	return func(c *SchemaCache) {
		if call > 0 {
			c.callBudget = call
		}
		if turn > 0 {
			c.turnBudget = turn
		}
	}
}

// NewSchemaCache returns an empty cache.
func NewSchemaCache(opts ...SchemaOption) *SchemaCache {
	c := &SchemaCache{
		loader:       refuseLoader{},
		draft:        jsonschema.Draft2020,
		formats:      FormatAssert,
		regexTimeout: defaultRegexTimeout,
		callBudget:   defaultCallMatchBudget,
		turnBudget:   defaultTurnMatchBudget,
		now:          time.Now,
		entries:      map[string]*schemaEntry{},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// NewTurnBudget returns the matching budget of one turn's calls, to hand to
// each Schema.Check of that turn.
func (c *SchemaCache) NewTurnBudget() *MatchBudget { return NewMatchBudget(c.turnBudget) }

// refuseLoader is the default loader: schemas may not pull in other
// documents.
type refuseLoader struct{}

// Load refuses url.
func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema references are resolved only inside the schema; %s is not loaded", url)
}

// Compile returns the compiled schema for these bytes, compiling each
// distinct text once (a failure is remembered too). The bytes are copied.
func (c *SchemaCache) Compile(schema []byte) (*Schema, error) {
	c.mu.RLock()
	e := c.entries[string(schema)]
	c.mu.RUnlock()
	if e == nil {
		c.mu.Lock()
		e = c.entries[string(schema)]
		if e == nil {
			raw := bytes.Clone(schema)
			e = &schemaEntry{get: sync.OnceValues(func() (*Schema, error) { return c.compile(raw) })}
			c.entries[string(raw)] = e
		}
		c.mu.Unlock()
	}
	return e.get()
}

func (c *SchemaCache) compile(raw []byte) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	sum := sha256.Sum256(raw)
	s := &Schema{raw: raw, cache: c, loc: "mem:///schema/" + hex.EncodeToString(sum[:16]) + ".json"}
	inst, err := c.compileInstance(doc, s.loc)
	if err != nil {
		return nil, err
	}
	s.first = inst
	// A loader may bring in documents this one does not show, with
	// `format: regex` in them.
	_, refusing := c.loader.(refuseLoader)
	s.matches = inst.patterns || (!c.formats.annotates("regex") && (!refusing || usesFormat(doc, "regex")))
	if s.matches {
		s.spare = []*schemaInstance{inst}
	}
	if fastDraft(doc, c.draft) {
		s.fast = compileFast(doc, true, c.formats.annotates)
	}
	return s, nil
}

// compileInstance compiles one instance of the schema document doc.
func (c *SchemaCache) compileInstance(doc any, loc string) (*schemaInstance, error) {
	inst := &schemaInstance{bound: c.regexTimeout}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(c.draft)
	comp.UseLoader(c.loader)
	comp.UseRegexpEngine(inst.engine(c.formats.annotates("regex")))
	c.formats.apply(comp)
	if err := comp.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	sch, err := comp.Compile(loc)
	if err != nil {
		inst.compiled = true
		return nil, fmt.Errorf("schema: %w", err)
	}
	roots, lost := []*jsonschema.Schema{sch}, false
	for _, ptr := range anchorPointers(doc) {
		if anchored, err := comp.Compile(loc + "#" + ptr); err == nil {
			roots = append(roots, anchored)
		} else {
			lost = true
		}
	}
	inst.compiled = true
	inst.sch = sch
	inst.steps = newStepGraph(roots, lost)
	return inst, nil
}

// usesFormat reports whether a schema document names format anywhere
// (also where it is not a keyword: the answer may be a false yes, never a
// false no).
func usesFormat(doc any, format string) bool {
	switch d := doc.(type) {
	case map[string]any:
		for k, v := range d {
			if s, ok := v.(string); ok && k == "format" && s == format {
				return true
			}
			if usesFormat(v, format) {
				return true
			}
		}
	case []any:
		for _, v := range d {
			if usesFormat(v, format) {
				return true
			}
		}
	}
	return false
}

// Schema is a compiled argument schema. Safe for concurrent use.
type Schema struct {
	// fast, when the schema uses only the keywords fastSchema knows, accepts
	// valid arguments without the general validator.
	fast *fastSchema
	raw  []byte
	// first is the instance compiled first; without matches, every
	// validation uses it.
	first *schemaInstance
	// matches: validating may match patterns or compile `format: regex`
	// values, with the validation's bounds, so each validation holds an
	// instance of its own (compiled anew when none is spare).
	matches bool
	cache   *SchemaCache
	loc     string

	mu    sync.Mutex
	spare []*schemaInstance // guarded by mu
}

// maxSpareInstances bounds the instances a Schema keeps between
// validations.
const maxSpareInstances = 4

// take returns an instance no other validation holds.
func (s *Schema) take() (*schemaInstance, error) {
	s.mu.Lock()
	if n := len(s.spare); n > 0 {
		inst := s.spare[n-1]
		s.spare[n-1] = nil
		s.spare = s.spare[:n-1]
		s.mu.Unlock()
		return inst, nil
	}
	s.mu.Unlock()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s.raw))
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	return s.cache.compileInstance(doc, s.loc)
}

// put hands an instance back.
func (s *Schema) put(inst *schemaInstance) {
	s.mu.Lock()
	if len(s.spare) < maxSpareInstances {
		s.spare = append(s.spare, inst)
	}
	s.mu.Unlock()
}

// Raw returns the schema text it was compiled from. Do not modify it.
func (s *Schema) Raw() []byte { return s.raw }

// Validate checks arguments (as ParseArgs decodes them: numbers may be
// json.Number) against the schema. A failure is a *ValidationError naming
// every failing field. Pattern matching is bounded by the cache's call
// budget; Check also takes a context and a turn's budget.
func (s *Schema) Validate(v map[string]any) error {
	return s.Check(context.Background(), v, nil)
}

// Check is Validate within ctx and the turn's matching budget (nil: the
// call's budget only). A match that runs past its bound, or a spent budget,
// refuses the arguments with a *ValidationError saying so (errors.Is
// ErrMatchBudget for the budget). When ctx ends while patterns are matched,
// matching stops and Check returns an error wrapping ErrCheckCanceled and
// ctx's error: the arguments were not checked in full.
func (s *Schema) Check(ctx context.Context, v map[string]any, turn *MatchBudget) error {
	if v == nil {
		v = map[string]any{}
	}
	return s.check(ctx, v, turn)
}

// ValidateValue checks any JSON value (an object, an array, a string…;
// numbers may be json.Number or float64) against the schema, such as a
// tool's result against its output schema. A failure is a
// *ValidationError naming every failing field (FieldError.Message).
func (s *Schema) ValidateValue(v any) error {
	return s.validate(v)
}

// validate checks any JSON value.
func (s *Schema) validate(v any) error {
	return s.check(context.Background(), v, nil)
}

func (s *Schema) check(ctx context.Context, v any, turn *MatchBudget) error {
	if s.fast != nil && s.fast.valid(v) {
		return nil
	}
	if !s.matches {
		if refused := takeSteps(s.first.steps, s.first.sch, v, turn); refused != nil {
			return refused
		}
		return phrase(s.first.sch.Validate(v), v, nil)
	}
	inst, err := s.take()
	if err != nil {
		return err
	}
	run := newMatchRun(ctx, s.cache.regexTimeout, s.cache.callBudget, turn, s.cache.now)
	inst.run = run
	if refused := takeSteps(inst.steps, inst.sch, v, turn); refused != nil {
		inst.run = nil
		s.put(inst)
		if run.stop == stoppedCanceled {
			return phrase(nil, v, run)
		}
		return refused
	}
	err = inst.sch.Validate(v)
	inst.run = nil
	s.put(inst)
	return phrase(err, v, run)
}

// phrase turns the validator's verdict and the run's matching into Check's
// answer.
func phrase(err error, v any, run *matchRun) error {
	if run != nil && run.stop == stoppedCanceled {
		return fmt.Errorf("%w: %w", ErrCheckCanceled, context.Cause(run.ctx))
	}
	var ve *jsonschema.ValidationError
	if err != nil && !errors.As(err, &ve) {
		return err
	}
	if ve == nil && (run == nil || run.stop == notStopped && len(run.gaveUp) == 0) {
		return nil
	}
	return newValidationError(ve, v, run)
}

// ValidationError is why arguments do not match their schema: one entry per
// problem, sorted by field path.
type ValidationError struct {
	Fields []FieldError
	cause  *jsonschema.ValidationError // nil when only matching refused
	budget bool                        // a matching budget was spent
	steps  bool                        // the evaluations would be too many
}

// FieldError is one problem with the arguments.
type FieldError struct {
	// Path is the field's JSON path (order.items[2].qty); "" is the
	// arguments object itself.
	Path string
	// Message is the whole phrase, path included, for example
	// `field "limit": want integer, got string` or
	// `missing required field "query"`.
	Message string
}

// Error lists every problem: `invalid arguments: missing required field
// "query"; field "limit": want integer, got string`.
func (e *ValidationError) Error() string {
	var sb strings.Builder
	sb.WriteString("invalid arguments: ")
	for i, f := range e.Fields {
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.WriteString(f.Message)
	}
	return sb.String()
}

// Unwrap returns the validator's own error tree, if it found a problem.
func (e *ValidationError) Unwrap() error {
	if e.cause == nil {
		return nil
	}
	return e.cause
}

// Is reports ErrMatchBudget when a matching budget was spent, and
// ErrSchemaSteps when checking would take too many evaluations.
func (e *ValidationError) Is(target error) bool {
	return e.budget && target == ErrMatchBudget || e.steps && target == ErrSchemaSteps
}

// issue is one problem found while walking the validator's error tree.
type issue struct {
	toks   []string // instance location of the field
	path   string   // toks rendered as a JSON path
	detail string   // what the field wants, when full is empty
	full   string   // the whole phrase, for phrases not of the `field "p": detail` form
	typ    *kind.Type
}

func (is issue) text() string {
	if is.full != "" {
		return is.full
	}
	return fieldRef(is.path) + ": " + is.detail
}

// textAt is the phrase inside an alternative of a field at path: the field
// name is left out when the issue is about that field itself.
func (is issue) textAt(path string) string {
	if is.full == "" && is.path == path {
		return is.detail
	}
	return is.text()
}

func fieldRef(path string) string {
	if path == "" {
		return "arguments"
	}
	return "field " + strconv.Quote(path)
}

func newValidationError(ve *jsonschema.ValidationError, root any, run *matchRun) *ValidationError {
	b := issueBuilder{root: root, run: run}
	var issues []issue
	if ve != nil {
		issues = b.walk(ve, nil)
	}
	budget := false
	if run != nil {
		issues = append(issues, b.gaveUpIssues()...)
		if text := run.stopText(); text != "" {
			issues = append(issues, issue{full: text})
			budget = true
		}
	}
	issues = sortIssues(issues)
	out := &ValidationError{cause: ve, budget: budget, Fields: make([]FieldError, 0, len(issues))}
	for _, is := range issues {
		out.Fields = append(out.Fields, FieldError{Path: is.path, Message: is.text()})
	}
	if len(out.Fields) == 0 {
		out.Fields = append(out.Fields, FieldError{Message: "arguments: do not match the schema"})
	}
	return out
}

// sortIssues orders issues by field path (array indexes numerically), then
// text, and drops repeats.
func sortIssues(issues []issue) []issue {
	slices.SortStableFunc(issues, func(a, b issue) int {
		if c := compareLoc(a.toks, b.toks); c != 0 {
			return c
		}
		return strings.Compare(a.text(), b.text())
	})
	return slices.CompactFunc(issues, func(a, b issue) bool {
		return a.path == b.path && a.text() == b.text()
	})
}

func compareLoc(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if len(x) != len(y) && allDigits(x) && allDigits(y) {
			return len(x) - len(y)
		}
		return strings.Compare(x, y)
	}
	return len(a) - len(b)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// issueBuilder phrases the validator's error tree.
type issueBuilder struct {
	root any       // the validated value, to tell array indexes from keys
	run  *matchRun // the validation's matching; nil without patterns
}

// at builds an issue about the field at toks.
func (b *issueBuilder) at(toks []string, detail string) issue {
	return issue{toks: toks, path: b.render(toks), detail: detail}
}

// child returns toks extended by one key, as a fresh slice.
func child(toks []string, key string) []string {
	out := make([]string, len(toks)+1)
	copy(out, toks)
	out[len(toks)] = key
	return out
}

// render writes an instance location as a JSON path: keys joined by dots
// (quoted in brackets when they are not plain names), array indexes in
// brackets.
func (b *issueBuilder) render(toks []string) string {
	var sb strings.Builder
	cur := b.root
	for _, tok := range toks {
		if arr, ok := cur.([]any); ok {
			sb.WriteByte('[')
			sb.WriteString(tok)
			sb.WriteByte(']')
			cur = nil
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(arr) {
				cur = arr[i]
			}
			continue
		}
		if m, ok := cur.(map[string]any); ok {
			cur = m[tok]
		} else {
			cur = nil
		}
		if plainName(tok) {
			if sb.Len() > 0 {
				sb.WriteByte('.')
			}
			sb.WriteString(tok)
		} else {
			sb.WriteByte('[')
			sb.WriteString(strconv.Quote(tok))
			sb.WriteByte(']')
		}
	}
	return sb.String()
}

func plainName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r == '_' || r == '-' || r == '$' || r == '@':
		case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= 0x80 && (strconv.IsPrint(r)) && r != 0x2028 && r != 0x2029 && !isSpace(r):
		default:
			return false
		}
	}
	return true
}

func isSpace(r rune) bool {
	switch r {
	case 0x85, 0xa0, 0x1680, 0x3000, 0x202f, 0x205f:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// walk appends the issues of e and its causes.
func (b *issueBuilder) walk(e *jsonschema.ValidationError, out []issue) []issue {
	loc := e.InstanceLocation
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf, nil:
		if len(e.Causes) == 0 {
			return append(out, b.at(loc, "does not match the schema"))
		}
		for _, c := range e.Causes {
			out = b.walk(c, out)
		}
		return out
	case *kind.AnyOf:
		return append(out, b.alternatives(e)...)
	case *kind.OneOf:
		if len(k.Subschemas) >= 2 {
			return append(out, b.at(loc, fmt.Sprintf("matches more than one allowed form (%d and %d); it must match exactly one", k.Subschemas[0]+1, k.Subschemas[1]+1)))
		}
		return append(out, b.alternatives(e)...)
	case *kind.Type:
		is := b.at(loc, "want "+strings.Join(k.Want, " or ")+", got "+k.Got)
		is.typ = k
		return append(out, is)
	case *kind.Required:
		for _, m := range k.Missing {
			toks := child(loc, m)
			is := issue{toks: toks, path: b.render(toks)}
			is.full = "missing required field " + strconv.Quote(is.path)
			out = append(out, is)
		}
		return out
	case *kind.AdditionalProperties:
		props := slices.Clone(k.Properties)
		slices.Sort(props)
		for _, p := range props {
			out = append(out, b.at(child(loc, p), "not allowed (no additional properties)"))
		}
		return out
	case *kind.Dependency:
		return b.dependent(out, loc, k.Prop, k.Missing)
	case *kind.DependentRequired:
		return b.dependent(out, loc, k.Prop, k.Missing)
	case *kind.PropertyNames:
		if b.undecided(e) {
			// The name's own issue (gaveUpIssues) or the spent budget says why.
			return out
		}
		return append(out, b.at(child(loc, k.Property), "field name not allowed by the schema"))
	case *kind.Pattern:
		if b.run.undecided(k.Want, k.Got) {
			return out
		}
	case *kind.Format:
		if errors.Is(k.Err, errNotChecked) {
			return out
		}
	}
	return append(out, b.at(loc, describeKind(e.ErrorKind)))
}

// undecided reports whether e's tree holds a pattern the run has no answer
// for.
func (b *issueBuilder) undecided(e *jsonschema.ValidationError) bool {
	if b.run == nil {
		return false
	}
	if k, ok := e.ErrorKind.(*kind.Pattern); ok && b.run.undecided(k.Want, k.Got) {
		return true
	}
	if k, ok := e.ErrorKind.(*kind.Format); ok && errors.Is(k.Err, errNotChecked) {
		return true
	}
	for _, c := range e.Causes {
		if b.undecided(c) {
			return true
		}
	}
	return false
}

// gaveUpIssues phrases each match that ran past its bound, at the first
// field (in key order) whose value, or else whose name, is the text matched.
func (b *issueBuilder) gaveUpIssues() []issue {
	var out []issue
	for _, g := range b.run.gaveUp {
		val, key := findText(b.root, g.text, nil)
		switch {
		case val != nil:
			out = append(out, b.at(val, fmt.Sprintf("could not be checked against pattern `%s`: matching %s, so the value is refused", g.pattern, g.why)))
		case key != nil:
			out = append(out, b.at(key, fmt.Sprintf("its name could not be checked against pattern `%s`: matching %s, so the field is refused", g.pattern, g.why)))
		default:
			out = append(out, issue{full: fmt.Sprintf("arguments: a value could not be checked against pattern `%s`: matching %s, so the arguments are refused", g.pattern, g.why)})
		}
	}
	return out
}

// findText returns the location of the first string value equal to text
// and of the first key equal to text, visiting keys in order; nil for
// none.
func findText(v any, text string, at []string) (val, key []string) {
	switch v := v.(type) {
	case string:
		if v == text {
			return slices.Clone(at), nil
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if k == text && key == nil {
				key = child(at, k)
			}
			vv, vk := findText(v[k], text, append(at, k))
			if vv != nil {
				return vv, key
			}
			if key == nil {
				key = vk
			}
		}
	case []any:
		for i, x := range v {
			vv, vk := findText(x, text, append(at, strconv.Itoa(i)))
			if vv != nil {
				return vv, key
			}
			if key == nil {
				key = vk
			}
		}
	}
	return nil, key
}

func (b *issueBuilder) dependent(out []issue, loc []string, prop string, missing []string) []issue {
	cause := strconv.Quote(b.render(child(loc, prop)))
	for _, m := range missing {
		toks := child(loc, m)
		is := issue{toks: toks, path: b.render(toks)}
		is.full = "missing field " + strconv.Quote(is.path) + " (required when " + cause + " is present)"
		out = append(out, is)
	}
	return out
}

// alternatives phrases an anyOf or oneOf that no alternative matched.
// Alternatives whose only problem is the field's type are dropped when
// another one has the right type; when only type problems remain they merge
// into one `want a or b, got c`.
func (b *issueBuilder) alternatives(e *jsonschema.ValidationError) []issue {
	loc := e.InstanceLocation
	path := b.render(loc)
	var typeOnly []*kind.Type
	var others [][]issue
	for _, c := range e.Causes {
		alt := sortIssues(b.walk(c, nil))
		if len(alt) == 1 && alt[0].typ != nil && alt[0].path == path {
			typeOnly = append(typeOnly, alt[0].typ)
			continue
		}
		others = append(others, alt)
	}
	switch {
	case len(others) == 0 && len(typeOnly) > 0:
		var want []string
		for _, t := range typeOnly {
			for _, w := range t.Want {
				if !slices.Contains(want, w) {
					want = append(want, w)
				}
			}
		}
		merged := &kind.Type{Got: typeOnly[0].Got, Want: want}
		is := b.at(loc, "want "+strings.Join(want, " or ")+", got "+merged.Got)
		is.typ = merged
		return []issue{is}
	case len(others) == 1:
		return others[0]
	case len(others) == 0:
		return []issue{b.at(loc, "matches none of the allowed forms")}
	}
	var sb strings.Builder
	sb.WriteString("matches none of the allowed forms: ")
	for i, alt := range others {
		if i > 0 {
			sb.WriteString(", or ")
		}
		fmt.Fprintf(&sb, "(%d) ", i+1)
		for j, is := range alt {
			if j > 0 {
				sb.WriteString(" and ")
			}
			sb.WriteString(is.textAt(path))
		}
	}
	return []issue{b.at(loc, sb.String())}
}

// describeKind phrases a leaf error: what the field wants.
func describeKind(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Enum:
		return "must be " + oneOf(k.Want)
	case *kind.Const:
		return "must be " + jsonText(k.Want)
	case *kind.FalseSchema:
		return "not allowed"
	case *kind.Not:
		return "must not match the excluded schema"
	case *kind.MinLength:
		return fmt.Sprintf("at least %s, got %d", plural(k.Want, "character"), k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("at most %s, got %d", plural(k.Want, "character"), k.Got)
	case *kind.MinItems:
		return fmt.Sprintf("at least %s, got %d", plural(k.Want, "item"), k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("at most %s, got %d", plural(k.Want, "item"), k.Got)
	case *kind.MinProperties:
		return fmt.Sprintf("at least %s, got %d", plural(k.Want, "field"), k.Got)
	case *kind.MaxProperties:
		return fmt.Sprintf("at most %s, got %d", plural(k.Want, "field"), k.Got)
	case *kind.AdditionalItems:
		return fmt.Sprintf("too many items: the last %s not allowed", plural(k.Count, "item is", "items are"))
	case *kind.UniqueItems:
		return fmt.Sprintf("items must be unique, but items %d and %d are equal", k.Duplicates[0], k.Duplicates[1])
	case *kind.Contains:
		return "must contain at least one item matching the schema's contains"
	case *kind.MinContains:
		return fmt.Sprintf("at least %s must match the schema's contains, got %d", plural(k.Want, "item"), len(k.Got))
	case *kind.MaxContains:
		return fmt.Sprintf("at most %s may match the schema's contains, got %d", plural(k.Want, "item"), len(k.Got))
	case *kind.Pattern:
		return fmt.Sprintf("must match pattern `%s`, got %s", k.Want, quoteShort(k.Got))
	case *kind.Format:
		return fmt.Sprintf("must be a valid %s, got %s", k.Want, jsonText(k.Got))
	case *kind.Minimum:
		return fmt.Sprintf("must be >= %s, got %s", ratText(k.Want), ratText(k.Got))
	case *kind.Maximum:
		return fmt.Sprintf("must be <= %s, got %s", ratText(k.Want), ratText(k.Got))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("must be > %s, got %s", ratText(k.Want), ratText(k.Got))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("must be < %s, got %s", ratText(k.Want), ratText(k.Got))
	case *kind.MultipleOf:
		return fmt.Sprintf("must be a multiple of %s, got %s", ratText(k.Want), ratText(k.Got))
	case *kind.ContentEncoding:
		return fmt.Sprintf("must be %s-encoded", k.Want)
	case *kind.ContentMediaType:
		return fmt.Sprintf("must hold valid %s content", k.Want)
	case *kind.ContentSchema:
		return "encoded content does not match its schema"
	case *kind.RefCycle:
		return "cannot be checked: the schema's references loop"
	case *kind.InvalidJsonValue:
		return fmt.Sprintf("is not a JSON value (%T)", k.Value)
	}
	return fmt.Sprintf("fails the schema's %q keyword", strings.Join(k.KeywordPath(), "/"))
}

// maxEnumShown bounds how many allowed values an enum message lists.
const maxEnumShown = 30

func oneOf(want []any) string {
	if len(want) == 1 {
		return jsonText(want[0])
	}
	var sb strings.Builder
	sb.WriteString("one of ")
	for i, w := range want {
		if i == maxEnumShown {
			fmt.Fprintf(&sb, ", … (%d more)", len(want)-maxEnumShown)
			break
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(jsonText(w))
	}
	return sb.String()
}

// jsonText renders a JSON value in canonical form.
func jsonText(v any) string {
	b, err := Canonicalize(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// quoteShort renders a string value, cut to a readable length.
func quoteShort(s string) string {
	const max = 80
	if len(s) > max {
		cut := max
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		return jsonText(s[:cut]) + "…"
	}
	return jsonText(s)
}

func isRuneStart(c byte) bool { return c&0xc0 != 0x80 }

func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// plural writes n and the noun, singular for 1: plural(2, "item") is
// "2 items"; an explicit plural form may follow the singular.
func plural(n int, singular string, pluralForm ...string) string {
	if n == 1 {
		return "1 " + singular
	}
	if len(pluralForm) > 0 {
		return strconv.Itoa(n) + " " + pluralForm[0]
	}
	return strconv.Itoa(n) + " " + singular + "s"
}

// fastSchema is a schema restricted to the keywords most tool schemas use —
// type, properties, required, additionalProperties, items (one schema),
// string enum, length and item-count bounds, and annotations — checked
// directly on decoded values. It only ever answers "valid" when the general
// validator would: anything it is unsure of (an invalid value, a Go-typed
// value, a number it cannot classify) goes to the general validator, which
// also phrases the errors.
type fastSchema struct {
	never    bool  // the false schema
	types    uint8 // allowed types (typeObject…); 0 means any
	props    map[string]*fastSchema
	required []string
	addl     *fastSchema // additionalProperties; nil means unconstrained
	items    *fastSchema // nil means unconstrained
	enum     []string    // allowed strings when hasEnum
	hasEnum  bool
	minLen   int // -1 when absent
	maxLen   int
	minItems int
	maxItems int
}

const (
	typeObject uint8 = 1 << iota
	typeArray
	typeString
	typeNumber
	typeInteger
	typeBoolean
	typeNull
)

var fastTypes = map[string]uint8{
	"object": typeObject, "array": typeArray, "string": typeString, "number": typeNumber,
	"integer": typeInteger, "boolean": typeBoolean, "null": typeNull,
}

// fastDraft tells whether a schema document is in a draft whose keywords
// fastSchema implements.
func fastDraft(doc any, def *jsonschema.Draft) bool {
	draft := def
	if m, isMap := doc.(map[string]any); isMap {
		if v, has := m["$schema"]; has {
			url, isStr := v.(string)
			if !isStr {
				return false
			}
			url = strings.TrimSuffix(url, "#")
			if u, cut := strings.CutPrefix(url, "http://"); cut {
				url = u
			} else {
				url = strings.TrimPrefix(url, "https://")
			}
			switch url {
			case "json-schema.org/draft-07/schema":
				draft = jsonschema.Draft7
			case "json-schema.org/draft/2019-09/schema":
				draft = jsonschema.Draft2019
			case "json-schema.org/draft/2020-12/schema", "json-schema.org/schema":
				draft = jsonschema.Draft2020
			default:
				return false
			}
		}
	}
	switch draft {
	case jsonschema.Draft7, jsonschema.Draft2019, jsonschema.Draft2020:
		return true
	}
	return false
}

// compileFast returns the fastSchema of a schema document, or nil when the
// document uses anything else. annotates tells whether a format name is
// only an annotation.
func compileFast(doc any, root bool, annotates func(string) bool) *fastSchema {
	switch d := doc.(type) {
	case bool:
		return &fastSchema{never: !d, minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
	case map[string]any:
		f := &fastSchema{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
		for k, v := range d {
			var ok bool
			switch k {
			case "title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly":
				ok = true
			case "$schema":
				ok = root
			case "format":
				name, isStr := v.(string)
				ok = isStr && annotates(name)
			case "type":
				f.types, ok = fastTypeSet(v)
			case "properties":
				var props map[string]any
				if props, ok = v.(map[string]any); ok {
					f.props = make(map[string]*fastSchema, len(props))
					for name, p := range props {
						if f.props[name] = compileFast(p, false, annotates); f.props[name] == nil {
							return nil
						}
					}
				}
			case "required":
				f.required, ok = stringList(v)
			case "additionalProperties":
				f.addl = compileFast(v, false, annotates)
				ok = f.addl != nil
			case "items":
				if _, isList := v.([]any); !isList {
					f.items = compileFast(v, false, annotates)
					ok = f.items != nil
				}
			case "enum":
				f.enum, ok = stringList(v)
				f.hasEnum = true
			case "minLength":
				f.minLen, ok = count(v)
			case "maxLength":
				f.maxLen, ok = count(v)
			case "minItems":
				f.minItems, ok = count(v)
			case "maxItems":
				f.maxItems, ok = count(v)
			}
			if !ok {
				return nil
			}
		}
		return f
	}
	return nil
}

func fastTypeSet(v any) (uint8, bool) {
	switch t := v.(type) {
	case string:
		bit, ok := fastTypes[t]
		return bit, ok
	case []any:
		var set uint8
		for _, e := range t {
			s, ok := e.(string)
			if !ok || fastTypes[s] == 0 {
				return 0, false
			}
			set |= fastTypes[s]
		}
		return set, set != 0
	}
	return 0, false
}

func stringList(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func count(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 32)
	if err != nil || i < 0 {
		return 0, false
	}
	return int(i), true
}

// valid reports whether v certainly matches; false means "ask the general
// validator".
func (f *fastSchema) valid(v any) bool {
	if f.never {
		return false
	}
	if f.types != 0 && !f.typeOK(v) {
		return false
	}
	if f.hasEnum {
		s, ok := v.(string)
		if !ok || !slices.Contains(f.enum, s) {
			return false
		}
	}
	switch v := v.(type) {
	case map[string]any:
		for _, r := range f.required {
			if _, ok := v[r]; !ok {
				return false
			}
		}
		if f.props != nil || f.addl != nil {
			for k, x := range v {
				if p, ok := f.props[k]; ok {
					if !p.valid(x) {
						return false
					}
				} else if f.addl != nil && !f.addl.valid(x) {
					return false
				}
			}
		}
	case []any:
		if (f.minItems >= 0 && len(v) < f.minItems) || (f.maxItems >= 0 && len(v) > f.maxItems) {
			return false
		}
		if f.items != nil {
			for _, x := range v {
				if !f.items.valid(x) {
					return false
				}
			}
		}
	case string:
		if f.minLen >= 0 || f.maxLen >= 0 {
			n := utf8.RuneCountInString(v)
			if (f.minLen >= 0 && n < f.minLen) || (f.maxLen >= 0 && n > f.maxLen) {
				return false
			}
		}
	case bool, nil, json.Number:
	default:
		return false
	}
	return true
}

func (f *fastSchema) typeOK(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		return f.types&typeObject != 0
	case []any:
		return f.types&typeArray != 0
	case string:
		return f.types&typeString != 0
	case bool:
		return f.types&typeBoolean != 0
	case nil:
		return f.types&typeNull != 0
	case json.Number:
		return f.types&typeNumber != 0 || (f.types&typeInteger != 0 && plainInteger(string(v)))
	}
	return false
}

// plainInteger reports whether s is an integer literal: optional minus, then
// digits only.
func plainInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
