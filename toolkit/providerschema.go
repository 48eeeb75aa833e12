package toolkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Provider schemas: a tool's JSON Schema converted to the subset a
// provider's tools array accepts. The conversion never changes what the
// dispatcher checks (validation always uses the tool's full schema); it
// changes only what the provider is told, by these rules:
//
//   - Structure is carried over exactly: types, properties, required,
//     items, enum, anyOf, nullability; a local $ref is inlined (a
//     recursive one is refused); const becomes a one-value enum; a oneOf
//     whose alternatives cannot overlap (each a distinct type) becomes
//     anyOf.
//   - Strict formats (openai-strict, responses): every object gets
//     additionalProperties false and lists every property as required; an
//     optional property is made nullable, and a null the model sends for
//     it means "absent" (View.StrictArgs drops it before validation).
//   - A constraint the subset lacks on a single value (a bound, a length,
//     a format, uniqueItems, multipleOf, a non-string enum for Gemini) and
//     the default and examples annotations are written into the
//     description, in brackets with their keyword names, so the model
//     still reads them; other annotations are dropped.
//   - What the subset cannot carry at all refuses the tool for that
//     format (a *SchemaRefusal naming the place and the reason): allOf,
//     not, if/then/else, dependent*, patternProperties, propertyNames,
//     unevaluated*, contains, prefixItems and tuple items, a oneOf whose
//     alternatives may overlap, a map (additionalProperties with a
//     schema), a free-form object or array, a remote or recursive $ref,
//     and a schema over the budget (maxInlinedBytes) as sent or inlined.
//     One exception: where a value may be a free-form object or a string
//     (run_tool's arguments), the string alternative carries it (as JSON
//     text) and the object alternative is left out.

// ToolsFormat names the shape of a tools array and the schema subset its
// provider accepts.
type ToolsFormat string

const (
	// ToolsOpenAI is the chat-completions function-tool shape with the
	// schemas as they are (non-strict function calling): the default.
	ToolsOpenAI ToolsFormat = "openai"
	// ToolsOpenAIStrict is the chat-completions shape with "strict": true
	// and schemas in OpenAI's strict (Structured Outputs) subset.
	ToolsOpenAIStrict ToolsFormat = "openai-strict"
	// ToolsResponses is the Responses API's flat function-tool shape,
	// strict (the Responses API's default), schemas as for
	// ToolsOpenAIStrict.
	ToolsResponses ToolsFormat = "responses"
	// ToolsAnthropic is Anthropic's tool shape, {"name","description",
	// "input_schema"}, the schema whole with an object root.
	ToolsAnthropic ToolsFormat = "anthropic"
	// ToolsGemini is one Gemini Tool of functionDeclarations, parameters
	// in Gemini's OpenAPI 3.0 subset (the Schema object).
	ToolsGemini ToolsFormat = "gemini"
)

// ToolsFormats lists every tools format.
var ToolsFormats = []ToolsFormat{ToolsOpenAI, ToolsOpenAIStrict, ToolsResponses, ToolsAnthropic, ToolsGemini}

// ErrSchemaRefused: a tool's schema cannot be expressed in a tools format
// without changing its meaning. A *SchemaRefusal wraps it.
var ErrSchemaRefused = errors.New("toolkit: schema cannot be expressed in the tools format")

// ParseToolsFormat reads a tools format option; "" is ToolsOpenAI.
func ParseToolsFormat(s string) (ToolsFormat, error) {
	if s == "" {
		return ToolsOpenAI, nil
	}
	if f := ToolsFormat(s); slices.Contains(ToolsFormats, f) {
		return f, nil
	}
	names := make([]string, len(ToolsFormats))
	for i, f := range ToolsFormats {
		names[i] = string(f)
	}
	return "", fmt.Errorf("tools format must be one of %s, not %q", strings.Join(names, ", "), clipText(s, 40))
}

// Strict reports whether f is a strict format, whose optional properties
// are sent as required and nullable.
func (f ToolsFormat) Strict() bool { return f == ToolsOpenAIStrict || f == ToolsResponses }

// SchemaRefusal is why a schema cannot be given in a format: the place in
// the schema (a JSON pointer, "" for the root) and the reason.
type SchemaRefusal struct {
	Format ToolsFormat
	Path   string
	Reason string
}

func (e *SchemaRefusal) Error() string {
	at := e.Path
	if at == "" {
		at = "the root"
	}
	return fmt.Sprintf("the schema cannot be given as %s: at %s, %s", e.Format, at, e.Reason)
}

func (e *SchemaRefusal) Unwrap() error { return ErrSchemaRefused }

// ProviderSchema returns schema as format f's provider accepts it, by the
// rules above, or a *SchemaRefusal. ToolsOpenAI returns it as it is.
func ProviderSchema(schema json.RawMessage, f ToolsFormat) (json.RawMessage, error) {
	out, _, err := convertSchema(schema, f)
	return out, err
}

// convertSchema converts schema for f and, for strict formats, returns the
// plan of the nulls that stand for absent properties.
func convertSchema(schema json.RawMessage, f ToolsFormat) (json.RawMessage, *nullPlan, error) {
	if f == ToolsOpenAI || f == "" {
		return schema, nil, nil
	}
	if len(schema) > maxInlinedBytes {
		return nil, nil, &SchemaRefusal{Format: f, Reason: fmt.Sprintf("the schema is %d bytes, over the budget of %d bytes a converted schema may have", len(schema), maxInlinedBytes)}
	}
	doc, err := decodeOrdered(schemaOrEmpty(schema))
	if err != nil {
		return nil, nil, &SchemaRefusal{Format: f, Reason: "it is not valid JSON: " + err.Error()}
	}
	root, ok := doc.(*jsonObject)
	if !ok {
		return nil, nil, &SchemaRefusal{Format: f, Reason: "a tool's schema must be a JSON object"}
	}
	c := &converter{f: f, doc: root}
	if m, err := c.measure(root, ""); err != nil {
		return nil, nil, err
	} else if m.height > maxInlineDepth {
		return nil, nil, c.refuse("", "the schema nests deeper than %d levels once its $refs are inlined", maxInlineDepth)
	}
	inlined, err := c.inline(root, "", 0)
	if err != nil {
		return nil, nil, err
	}
	n := inlined.(*jsonObject)
	for _, k := range []string{"$schema", "$id", "$defs", "definitions", "$comment"} {
		n.del(k)
	}
	if t, ok := n.get("type"); !ok {
		n.set("type", "object")
	} else if t != "object" {
		return nil, nil, c.refuse("", "the root must be an object schema (arguments are an object)")
	}
	var plan *nullPlan
	switch f {
	case ToolsAnthropic:
		// Anthropic takes JSON Schema whole; the root is an object.
	case ToolsOpenAIStrict, ToolsResponses:
		plan = &nullPlan{}
		if n, err = c.strict(n, "", plan, true); err != nil {
			return nil, nil, err
		}
	case ToolsGemini:
		if n, err = c.gemini(n, ""); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("unknown tools format %q", f)
	}
	b, err := marshalOrdered(n)
	if err != nil {
		return nil, nil, err
	}
	return b, plan, nil
}

func schemaOrEmpty(s json.RawMessage) []byte {
	if len(strings.TrimSpace(string(s))) == 0 {
		return []byte(`{"type":"object"}`)
	}
	return s
}

// maxInlineDepth bounds how deep inlining $refs nests, so a chain of
// references cannot blow a schema up without end.
const maxInlineDepth = 64

// maxInlinedBytes is the budget of a conversion: the schema as sent, and
// its compact JSON once every local $ref is inlined, may have at most
// this many bytes. A few KB of definitions that each point at the next
// several times would inline to gigabytes (8 properties by 7 levels:
// 8^7 copies); the inlined size is measured before anything is built, so
// a schema over the budget is refused having cost about its own size.
// Providers take far less than this (OpenAI's strict mode: 120 000
// characters of names and values; an MCP server's schema: 64 KiB).
const maxInlinedBytes = 128 << 10

// converter rewrites one schema for one format.
type converter struct {
	f    ToolsFormat
	doc  *jsonObject // the whole document, for $ref
	refs []string    // the $refs being inlined, outermost first
	// measured: the inlined measure of each $ref target measured;
	// measuring: the targets whose measure is under way (a recursion).
	measured  map[*jsonObject]inlinedMeasure
	measuring map[*jsonObject]bool
}

// inlinedMeasure is what inlining a value gives: the length of its compact
// JSON, its height (the levels inline descends below it) and, for an
// object, its number of keys.
type inlinedMeasure struct {
	bytes, height, keys int
}

// measure returns the measure of v (at path) once inlined as inline
// would inline it, refusing a recursion as inline would and a total over
// maxInlinedBytes, without building anything. Each $ref target is
// measured once, so the cost is about the schema's size times its depth,
// whatever the inlined size. Where a $ref's sibling replaces an
// annotation of its target the measure counts both: an upper bound.
func (c *converter) measure(v any, path string) (inlinedMeasure, error) {
	over := func(m inlinedMeasure) error {
		if m.bytes > maxInlinedBytes {
			return c.refuse(path, "the schema inlines its $refs to more than the budget of %d bytes a converted schema may have", maxInlinedBytes)
		}
		return nil
	}
	switch t := v.(type) {
	case []any:
		m := inlinedMeasure{bytes: 2}
		for i, x := range t {
			sub, err := c.measure(x, fmt.Sprintf("%s/%d", path, i))
			if err != nil {
				return m, err
			}
			m.bytes += sub.bytes
			if i > 0 {
				m.bytes++
			}
			m.height = max(m.height, sub.height+1)
			if err := over(m); err != nil {
				return m, err
			}
		}
		return m, nil
	case *jsonObject:
		m := inlinedMeasure{bytes: 2}
		if r, ok := t.get("$ref"); ok {
			ref, _ := r.(string)
			target, err := c.resolve(ref, path)
			if err != nil {
				return m, err
			}
			to, ok := target.(*jsonObject)
			if !ok {
				return m, c.refuse(path, "$ref %q does not point to a schema object", clipText(ref, 80))
			}
			if m, ok = c.measured[to]; !ok {
				if c.measuring[to] {
					return m, c.refuse(path, "$ref %q refers to itself (a recursive schema)", clipText(ref, 80))
				}
				if c.measuring == nil {
					c.measuring, c.measured = map[*jsonObject]bool{}, map[*jsonObject]inlinedMeasure{}
				}
				c.measuring[to] = true
				m, err = c.measure(to, path)
				delete(c.measuring, to)
				if err != nil {
					return m, err
				}
				c.measured[to] = m
			}
			m.height++
		}
		for _, k := range t.keys {
			if k == "$ref" || (!t.has("$ref") && (k == "$defs" || k == "definitions")) {
				continue
			}
			sub, err := c.measure(t.vals[k], path+"/"+escapePointer(k))
			if err != nil {
				return m, err
			}
			kb, _ := json.Marshal(k)
			if m.keys > 0 {
				m.bytes++
			}
			m.bytes += len(kb) + 1 + sub.bytes
			m.keys++
			m.height = max(m.height, sub.height+1)
			if err := over(m); err != nil {
				return m, err
			}
		}
		return m, nil
	}
	b, err := marshalOrdered(v)
	if err != nil {
		return inlinedMeasure{}, c.refuse(path, "a value cannot be encoded: %v", err)
	}
	return inlinedMeasure{bytes: len(b)}, nil
}

func (c *converter) refuse(path, format string, args ...any) error {
	return &SchemaRefusal{Format: c.f, Path: path, Reason: fmt.Sprintf(format, args...)}
}

// inline returns v with every local $ref replaced by a copy of what it
// points to. A $ref beside other keywords is merged with them when they
// do not clash.
func (c *converter) inline(v any, path string, depth int) (any, error) {
	if depth > maxInlineDepth {
		return nil, c.refuse(path, "the schema nests deeper than %d levels", maxInlineDepth)
	}
	switch t := v.(type) {
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			var err error
			if out[i], err = c.inline(x, fmt.Sprintf("%s/%d", path, i), depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case *jsonObject:
		if r, ok := t.get("$ref"); ok {
			ref, _ := r.(string)
			if slices.Contains(c.refs, ref) {
				return nil, c.refuse(path, "$ref %q refers to itself (a recursive schema)", clipText(ref, 80))
			}
			target, err := c.resolve(ref, path)
			if err != nil {
				return nil, err
			}
			c.refs = append(c.refs, ref)
			// inline builds every object and array anew and shares no
			// node of the document: the target is not copied first.
			in, err := c.inline(target, path, depth+1)
			c.refs = c.refs[:len(c.refs)-1]
			if err != nil {
				return nil, err
			}
			merged, ok := in.(*jsonObject)
			if !ok {
				return nil, c.refuse(path, "$ref %q does not point to a schema object", clipText(ref, 80))
			}
			for _, k := range t.keys {
				if k == "$ref" {
					continue
				}
				if merged.has(k) && !slices.Contains([]string{"description", "title", "default", "examples", "$comment"}, k) {
					return nil, c.refuse(path, "$ref beside %q, which the referenced schema also has", k)
				}
				sub, err := c.inline(t.vals[k], path+"/"+k, depth+1)
				if err != nil {
					return nil, err
				}
				merged.set(k, sub)
			}
			return merged, nil
		}
		out := newJSONObject()
		for _, k := range t.keys {
			if k == "$defs" || k == "definitions" {
				continue // read through $ref only
			}
			sub, err := c.inline(t.vals[k], path+"/"+escapePointer(k), depth+1)
			if err != nil {
				return nil, err
			}
			out.set(k, sub)
		}
		return out, nil
	}
	return v, nil
}

// resolve finds the local reference ref ("#", "#/$defs/x", any JSON
// pointer into the document).
func (c *converter) resolve(ref, path string) (any, error) {
	if !strings.HasPrefix(ref, "#") {
		return nil, c.refuse(path, "$ref %q is not a reference inside the schema", clipText(ref, 80))
	}
	var cur any = c.doc
	ptr := strings.TrimPrefix(ref, "#")
	if ptr == "" {
		return cur, nil
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, c.refuse(path, "$ref %q is an anchor, not a JSON pointer", clipText(ref, 80))
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		o, ok := cur.(*jsonObject)
		if !ok {
			return nil, c.refuse(path, "$ref %q points nowhere", clipText(ref, 80))
		}
		if cur, ok = o.get(tok); !ok {
			return nil, c.refuse(path, "$ref %q points nowhere", clipText(ref, 80))
		}
	}
	return cur, nil
}

func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// Keywords by what the conversion does with them.
var (
	// structural keywords no converted format can carry.
	refusedKeywords = []string{"allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
		"dependencies", "patternProperties", "propertyNames", "unevaluatedProperties", "unevaluatedItems",
		"contains", "prefixItems", "additionalItems", "$dynamicRef", "$recursiveRef"}
	// annotations written into the description.
	describedAnnotations = []string{"default", "examples"}
	// annotations and keywords dropped without a trace: they constrain
	// nothing the provider is told.
	droppedKeywords = []string{"$schema", "$id", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$comment", "$vocabulary",
		"deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "contentSchema", "minContains", "maxContains"}
)

// typeNames are the JSON Schema type names.
var typeNames = []string{"string", "number", "integer", "boolean", "object", "array", "null"}

// types returns the types node declares (nil when it declares none).
func types(n *jsonObject) ([]string, bool) {
	t, ok := n.get("type")
	if !ok {
		return nil, true
	}
	switch v := t.(type) {
	case string:
		return []string{v}, slices.Contains(typeNames, v)
	case []any:
		var out []string
		for _, x := range v {
			s, ok := x.(string)
			if !ok || !slices.Contains(typeNames, s) {
				return nil, false
			}
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out, len(out) > 0
	}
	return nil, false
}

// keywordsOf are the keywords that apply only to values of one type.
var keywordsOf = map[string][]string{
	"string":  {"minLength", "maxLength", "pattern", "format"},
	"number":  {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format"},
	"integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format"},
	"object":  {"properties", "required", "additionalProperties", "minProperties", "maxProperties"},
	"array":   {"items", "minItems", "maxItems", "uniqueItems"},
}

// splitTypes turns a node of several non-null types into anyOf of one
// node per type, each with the keywords that apply to its type, the rest
// (description, title, default…) on the outer node. A null type becomes
// its own alternative.
func splitTypes(n *jsonObject, ts []string) *jsonObject {
	outer := newJSONObject()
	var alts []any
	for _, t := range ts {
		alt := newJSONObject()
		alt.set("type", t)
		for _, k := range keywordsOf[t] {
			if v, ok := n.get(k); ok {
				alt.set(k, cloneOrdered(v))
			}
		}
		alts = append(alts, alt)
	}
	for _, k := range n.keys {
		if k == "type" || isTypeKeyword(k) {
			continue
		}
		outer.set(k, n.vals[k])
	}
	outer.set("anyOf", alts)
	return outer
}

func isTypeKeyword(k string) bool {
	for _, ks := range keywordsOf {
		if slices.Contains(ks, k) {
			return true
		}
	}
	return false
}

// freeForm reports whether an object node lets any property through: no
// properties declared and additionalProperties not false.
func freeForm(n *jsonObject) bool {
	if n.has("properties") {
		return false
	}
	ap, ok := n.get("additionalProperties")
	return !ok || ap != false
}

// describe appends notes to node's description: "[keyword: value; …]".
func describe(n *jsonObject, notes []string) {
	if len(notes) == 0 {
		return
	}
	d, _ := n.get("description")
	s, _ := d.(string)
	if s != "" {
		s += " "
	}
	n.set("description", s+"["+strings.Join(notes, "; ")+"]")
}

// note is "keyword: value" with value as compact JSON.
func note(k string, v any) string {
	b, err := marshalOrdered(v)
	if err != nil {
		return k
	}
	return k + ": " + string(b)
}

// oneOfAsAnyOf returns the alternatives of a oneOf that can become anyOf
// (each declares types no other one has), or false.
func oneOfAsAnyOf(alts []any) bool {
	seen := map[string]bool{}
	for _, a := range alts {
		o, ok := a.(*jsonObject)
		if !ok {
			return false
		}
		ts, ok := types(o)
		if !ok || len(ts) == 0 {
			return false
		}
		for _, t := range ts {
			if seen[t] || (t == "number" && seen["integer"]) || (t == "integer" && seen["number"]) {
				return false
			}
			seen[t] = true
		}
	}
	return true
}

// commonChecks applies what every converted format shares to node n at
// path: refused keywords, const, oneOf, described annotations and dropped
// keywords. It returns the notes for the description.
func (c *converter) commonChecks(n *jsonObject, path string) ([]string, error) {
	for _, k := range refusedKeywords {
		if n.has(k) {
			if k == "additionalItems" || k == "dependencies" {
				if v, _ := n.get(k); v == true {
					n.del(k)
					continue
				}
			}
			return nil, c.refuse(path, "%s cannot be expressed in this format", k)
		}
	}
	if items, ok := n.get("items"); ok {
		if _, tuple := items.([]any); tuple {
			return nil, c.refuse(path, "items as an array (a tuple) cannot be expressed in this format")
		}
	}
	if v, ok := n.get("const"); ok {
		n.del("const")
		if e, ok := n.get("enum"); ok {
			if !slices.ContainsFunc(e.([]any), func(x any) bool { return jsonEqual(x, v) }) {
				return nil, c.refuse(path, "const is not among the enum's values")
			}
		}
		n.set("enum", []any{v})
	}
	if alts, ok := n.get("oneOf"); ok {
		list, _ := alts.([]any)
		if !oneOfAsAnyOf(list) || n.has("anyOf") {
			return nil, c.refuse(path, "oneOf whose alternatives may overlap cannot be expressed in this format")
		}
		n.del("oneOf")
		n.set("anyOf", list)
	}
	var notes []string
	for _, k := range describedAnnotations {
		if v, ok := n.get(k); ok {
			notes = append(notes, note(k, v))
			n.del(k)
		}
	}
	for _, k := range droppedKeywords {
		n.del(k)
	}
	return notes, nil
}

func jsonEqual(a, b any) bool {
	x, err1 := marshalOrdered(a)
	y, err2 := marshalOrdered(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// typesOf returns the types node n declares, after the one narrowing the
// conversion allows: a free-form object beside a string leaves the string,
// which carries the object as JSON text (noted in the description).
func (c *converter) typesOf(n *jsonObject, path string, notes *[]string) ([]string, error) {
	ts, ok := types(n)
	if !ok {
		return nil, c.refuse(path, "type must name JSON Schema types")
	}
	if slices.Contains(ts, "object") && slices.Contains(ts, "string") && freeForm(n) {
		ts = slices.DeleteFunc(slices.Clone(ts), func(t string) bool { return t == "object" })
		for _, k := range keywordsOf["object"] {
			n.del(k)
		}
		*notes = append(*notes, "an object is given as its JSON text")
		n.set("type", typeValue(ts))
	}
	return ts, nil
}

// alternatives converts each alternative of n's anyOf with conv.
func (c *converter) alternatives(n *jsonObject, path string, conv func(*jsonObject, string) (*jsonObject, error)) error {
	alts, ok := n.get("anyOf")
	if !ok {
		return nil
	}
	list, _ := alts.([]any)
	out := make([]any, len(list))
	for i, a := range list {
		at := fmt.Sprintf("%s/anyOf/%d", path, i)
		o, ok := a.(*jsonObject)
		if !ok {
			return c.refuse(at, "an alternative must be a schema object")
		}
		var err error
		if out[i], err = conv(o, at); err != nil {
			return err
		}
	}
	n.set("anyOf", out)
	return nil
}

// strictFormats are the formats OpenAI's strict mode asserts.
var strictFormats = []string{"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}

// strictKeywords are the keywords a strict schema may hold.
var strictKeywords = []string{"type", "description", "title", "properties", "required", "additionalProperties", "items",
	"enum", "anyOf", "pattern", "format", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
	"exclusiveMaximum", "multipleOf", "minItems", "maxItems"}

// strict converts node n at path to OpenAI's strict subset. plan collects
// the properties whose null means absent. root is set for the schema's
// root, whose declared-empty properties mean "no arguments".
func (c *converter) strict(n *jsonObject, path string, plan *nullPlan, root bool) (*jsonObject, error) {
	notes, err := c.commonChecks(n, path)
	if err != nil {
		return nil, err
	}
	ts, err := c.typesOf(n, path, &notes)
	if err != nil {
		return nil, err
	}
	if nonNull := slices.DeleteFunc(slices.Clone(ts), func(t string) bool { return t == "null" }); len(nonNull) > 1 {
		split := splitTypes(n, nonNull)
		if slices.Contains(ts, "null") {
			alts, _ := split.get("anyOf")
			split.set("anyOf", append(alts.([]any), typeNode("null")))
		}
		describe(split, notes)
		return c.strict(split, path, plan, root)
	}
	if root && n.has("anyOf") {
		return nil, c.refuse(path, "anyOf at the root cannot be expressed in strict mode")
	}
	if err := c.alternatives(n, path, func(o *jsonObject, at string) (*jsonObject, error) {
		return c.strict(o, at, plan, false)
	}); err != nil {
		return nil, err
	}
	if f, ok := n.get("format"); ok {
		if s, _ := f.(string); !slices.Contains(strictFormats, s) {
			notes = append(notes, note("format", f))
			n.del("format")
		}
	}
	for _, k := range []string{"minProperties", "maxProperties", "uniqueItems"} {
		if v, ok := n.get(k); ok {
			notes = append(notes, note(k, v))
			n.del(k)
		}
	}
	isObject := slices.Contains(ts, "object") || (len(ts) == 0 && n.has("properties"))
	isArray := slices.Contains(ts, "array") || (len(ts) == 0 && n.has("items"))
	switch {
	case isObject:
		if err := c.strictObject(n, path, plan, root); err != nil {
			return nil, err
		}
	case isArray:
		items, ok := n.get("items")
		if !ok || items == true {
			return nil, c.refuse(path, "an array needs an items schema in this format")
		}
		io, ok := items.(*jsonObject)
		if !ok {
			return nil, c.refuse(path+"/items", "items must be a schema object")
		}
		sub := plan.itemsPlan()
		conv, err := c.strict(io, path+"/items", sub, false)
		if err != nil {
			return nil, err
		}
		n.set("items", conv)
	case len(ts) == 0 && !n.has("anyOf") && !n.has("enum"):
		return nil, c.refuse(path, "a schema without a type (any value) cannot be expressed in strict mode")
	}
	n.keep(func(k string) bool { return slices.Contains(strictKeywords, k) })
	describe(n, notes)
	return n, nil
}

// strictObject makes an object node strict: every property required,
// optional ones nullable, additionalProperties false.
func (c *converter) strictObject(n *jsonObject, path string, plan *nullPlan, root bool) error {
	if ap, ok := n.get("additionalProperties"); ok && ap != false && ap != true {
		return c.refuse(path, "a map (additionalProperties with a schema) cannot be expressed in strict mode")
	}
	if !n.has("properties") {
		// Only a root that forbids every property says "no arguments"
		// without declaring properties; anywhere else, and with extra
		// properties allowed, it is a free-form object.
		if ap, _ := n.get("additionalProperties"); !root || ap != false {
			return c.refuse(path, "a free-form object (no properties declared) cannot be expressed in strict mode")
		}
	}
	props := newJSONObject()
	if p, ok := n.get("properties"); ok {
		if props, ok = p.(*jsonObject); !ok {
			return c.refuse(path+"/properties", "properties must be an object")
		}
	}
	required := map[string]bool{}
	if r, ok := n.get("required"); ok {
		list, _ := r.([]any)
		for _, x := range list {
			s, _ := x.(string)
			if !props.has(s) {
				return c.refuse(path, "required property %q is not declared in properties", clipText(s, 64))
			}
			required[s] = true
		}
	}
	all := make([]any, 0, len(props.keys))
	for _, k := range props.keys {
		p, ok := props.vals[k].(*jsonObject)
		if !ok {
			return c.refuse(path+"/properties/"+escapePointer(k), "a property's schema must be an object")
		}
		child := plan.propPlan(k)
		conv, err := c.strict(p, path+"/properties/"+escapePointer(k), child, false)
		if err != nil {
			return err
		}
		if !required[k] && !acceptsNull(conv) {
			makeNullable(conv)
			plan.dropNull(k)
		}
		props.set(k, conv)
		all = append(all, k)
	}
	n.set("properties", props)
	n.set("required", all)
	n.set("additionalProperties", false)
	if !n.has("type") {
		n.set("type", "object")
	}
	return nil
}

func typeNode(t string) *jsonObject {
	o := newJSONObject()
	o.set("type", t)
	return o
}

// typeValue is ts as the value of "type": one name, or a list.
func typeValue(ts []string) any {
	if len(ts) == 1 {
		return ts[0]
	}
	out := make([]any, len(ts))
	for i, t := range ts {
		out[i] = t
	}
	return out
}

// acceptsNull reports whether a converted node lets null through.
func acceptsNull(n *jsonObject) bool {
	if ts, _ := types(n); slices.Contains(ts, "null") {
		return true
	}
	if e, ok := n.get("enum"); ok {
		if slices.Contains(e.([]any), nil) {
			return true
		}
	}
	if a, ok := n.get("anyOf"); ok {
		for _, x := range a.([]any) {
			if o, ok := x.(*jsonObject); ok && acceptsNull(o) {
				return true
			}
		}
	}
	return false
}

// makeNullable lets null through a converted strict node.
func makeNullable(n *jsonObject) {
	if e, ok := n.get("enum"); ok {
		n.set("enum", append(e.([]any), nil))
	}
	if a, ok := n.get("anyOf"); ok {
		n.set("anyOf", append(a.([]any), typeNode("null")))
		return
	}
	if ts, _ := types(n); len(ts) > 0 {
		n.set("type", typeValue(append(ts, "null")))
	}
}

// geminiTypes maps JSON Schema types to Gemini's Type enum.
var geminiTypes = map[string]string{"string": "STRING", "number": "NUMBER", "integer": "INTEGER",
	"boolean": "BOOLEAN", "object": "OBJECT", "array": "ARRAY", "null": "NULL"}

// geminiFormats are the formats Gemini's Schema takes, by type.
var geminiFormats = map[string][]string{"string": {"date-time", "enum"}, "integer": {"int32", "int64"}, "number": {"float", "double"}}

// geminiKeywords are the keywords of Gemini's Schema object.
var geminiKeywords = []string{"anyOf", "default", "description", "enum", "example", "format", "items", "maxItems",
	"maxLength", "maxProperties", "maximum", "minItems", "minLength", "minProperties", "minimum", "nullable",
	"pattern", "properties", "propertyOrdering", "required", "title", "type"}

// gemini converts node n at path to Gemini's Schema subset.
func (c *converter) gemini(n *jsonObject, path string) (*jsonObject, error) {
	// Gemini takes default, and the first of examples as example.
	def, hasDef := n.get("default")
	ex, hasEx := n.get("examples")
	n.del("default")
	n.del("examples")
	notes, err := c.commonChecks(n, path)
	if err != nil {
		return nil, err
	}
	if hasDef {
		n.set("default", def)
	}
	if list, _ := ex.([]any); hasEx && len(list) > 0 {
		n.set("example", list[0])
	}
	ts, err := c.typesOf(n, path, &notes)
	if err != nil {
		return nil, err
	}
	nullable := slices.Contains(ts, "null") && len(ts) > 1
	nonNull := slices.DeleteFunc(slices.Clone(ts), func(t string) bool { return t == "null" })
	if len(nonNull) > 1 {
		split := splitTypes(n, nonNull)
		if nullable {
			split.set("nullable", true)
		}
		describe(split, notes)
		return c.gemini(split, path)
	}
	if nullable {
		n.set("nullable", true)
	}
	t := ""
	if len(nonNull) == 1 {
		t = nonNull[0]
	} else if len(ts) == 1 {
		t = "null"
	}
	if t == "" && n.has("properties") {
		t = "object"
	}
	if t == "" && n.has("items") {
		t = "array"
	}
	if t != "" {
		n.set("type", geminiTypes[t])
	}
	t, notes = geminiEnum(n, t, notes)
	if f, ok := n.get("format"); ok {
		if s, _ := f.(string); !slices.Contains(geminiFormats[t], s) {
			notes = append(notes, note("format", f))
			n.del("format")
		}
	}
	for _, k := range []string{"exclusiveMinimum", "exclusiveMaximum", "multipleOf", "uniqueItems"} {
		if v, ok := n.get(k); ok {
			notes = append(notes, note(k, v))
			n.del(k)
		}
	}
	// int64 fields are strings in Gemini's JSON.
	for _, k := range []string{"minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"} {
		if v, ok := n.get(k); ok {
			n.set(k, fmt.Sprint(v))
		}
	}
	if err := c.alternatives(n, path, c.gemini); err != nil {
		return nil, err
	}
	switch t {
	case "object":
		if err := c.geminiObject(n, path); err != nil {
			return nil, err
		}
	case "array":
		if err := c.geminiArray(n, path); err != nil {
			return nil, err
		}
	case "":
		if !n.has("anyOf") {
			return nil, c.refuse(path, "a schema without a type (any value) cannot be expressed in Gemini's schema")
		}
	}
	n.keep(func(k string) bool { return slices.Contains(geminiKeywords, k) })
	describe(n, notes)
	return n, nil
}

// geminiEnum keeps an enum of strings (a null in it makes the schema
// nullable) for a string or untyped schema, typing the latter STRING, and
// moves any other enum into the notes; it returns the type and notes.
func geminiEnum(n *jsonObject, t string, notes []string) (string, []string) {
	e, ok := n.get("enum")
	if !ok {
		return t, notes
	}
	var strs []any
	allStrings := true
	for _, v := range e.([]any) {
		switch s := v.(type) {
		case string:
			strs = append(strs, s)
		case nil:
			n.set("nullable", true)
		default:
			allStrings = false
		}
	}
	if !allStrings || (t != "string" && t != "") {
		n.del("enum")
		return t, append(notes, note("enum", e))
	}
	n.set("enum", strs)
	if t == "" {
		t = "string"
		n.set("type", "STRING")
	}
	return t, notes
}

// geminiObject converts an object schema's properties for Gemini (in
// order, kept in propertyOrdering) and refuses what its schema cannot
// say: a map, a free-form object, a required property not declared.
func (c *converter) geminiObject(n *jsonObject, path string) error {
	if ap, ok := n.get("additionalProperties"); ok && ap != false && ap != true {
		return c.refuse(path, "a map (additionalProperties with a schema) cannot be expressed in Gemini's schema")
	}
	if freeForm(n) {
		return c.refuse(path, "a free-form object (no properties declared) cannot be expressed in Gemini's schema")
	}
	n.del("additionalProperties")
	if p, ok := n.get("properties"); ok {
		props, ok := p.(*jsonObject)
		if !ok {
			return c.refuse(path+"/properties", "properties must be an object")
		}
		order := make([]any, 0, len(props.keys))
		for _, k := range props.keys {
			po, ok := props.vals[k].(*jsonObject)
			if !ok {
				return c.refuse(path+"/properties/"+escapePointer(k), "a property's schema must be an object")
			}
			conv, err := c.gemini(po, path+"/properties/"+escapePointer(k))
			if err != nil {
				return err
			}
			props.set(k, conv)
			order = append(order, k)
		}
		if len(order) > 1 {
			n.set("propertyOrdering", order)
		}
	}
	if r, ok := n.get("required"); ok {
		for _, x := range r.([]any) {
			if p, _ := n.get("properties"); p == nil || !p.(*jsonObject).has(fmt.Sprint(x)) {
				return c.refuse(path, "required property %q is not declared in properties", clipText(fmt.Sprint(x), 64))
			}
		}
	}
	return nil
}

// geminiArray converts an array schema's items for Gemini, which needs
// one items schema.
func (c *converter) geminiArray(n *jsonObject, path string) error {
	items, ok := n.get("items")
	if !ok || items == true {
		return c.refuse(path, "an array needs an items schema in Gemini's schema")
	}
	io, ok := items.(*jsonObject)
	if !ok {
		return c.refuse(path+"/items", "items must be a schema object")
	}
	conv, err := c.gemini(io, path+"/items")
	if err != nil {
		return err
	}
	n.set("items", conv)
	return nil
}
