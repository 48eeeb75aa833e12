package toolkit

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Typed reads the `jsonschema` struct tags of both styles Go agent code
// uses, so that one input struct serves tooldispatch whichever it was
// written for:
//
//   - go-sdk's (github.com/google/jsonschema-go): the whole tag is the
//     field's description, `jsonschema:"the city"`;
//   - eino's (github.com/eino-contrib/jsonschema): comma-separated key=value
//     items, `jsonschema:"description=the city,enum=Berlin,enum=Paris"`
//     (a comma inside a value written \,), and the `jsonschema_description`
//     tag.
//
// A tag is eino's when it begins with WORD= (the form jsonschema-go
// refuses) or holds only eino's bare words required and nullable.
// Of eino's keys these are read: description, title, enum, default,
// example, minimum, maximum, exclusiveMinimum, exclusiveMaximum,
// multipleOf, minLength, maxLength, pattern, format, minItems, maxItems,
// uniqueItems, and the bare words required and nullable; any other key
// (oneof_type, anyof_ref, …) is a registration error naming it, never
// silently dropped. Struct types whose fields carry eino tags get their
// schema here, field by field, by jsonschema-go's own rules (json names,
// omitempty and omitzero optional, no additional properties); every other
// type is left to jsonschema-go.

// keyValueTag matches a tag in eino's key=value form (jsonschema-go's
// disallowed prefix).
var keyValueTag = regexp.MustCompile(`^[^ \t\n]*=`)

// einoTag reports whether a jsonschema tag is in eino's style: key=value
// items, or only eino's bare words (required, nullable; "-" leaves the
// field out).
func einoTag(tag string) bool {
	if keyValueTag.MatchString(tag) || tag == "-" {
		return true
	}
	for _, w := range strings.Split(tag, ",") {
		if w != "required" && w != "nullable" {
			return false
		}
	}
	return true
}

// typedSchema returns the schema of t with the eino-style tags read.
func typedSchema(t reflect.Type) (*jsonschema.Schema, error) {
	w := &tagWalker{overrides: map[reflect.Type]*jsonschema.Schema{}, state: map[reflect.Type]walkState{}}
	if err := w.walk(t); err != nil {
		return nil, err
	}
	return jsonschema.ForType(t, w.options())
}

type walkState int

const (
	walking walkState = iota + 1
	walked
)

// tagWalker finds the struct types that need their own schema, inner
// types first, and makes them.
type tagWalker struct {
	overrides map[reflect.Type]*jsonschema.Schema
	state     map[reflect.Type]walkState
}

func (w *tagWalker) options() *jsonschema.ForOptions {
	return &jsonschema.ForOptions{TypeSchemas: w.overrides}
}

func (w *tagWalker) walk(t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return w.walk(t.Elem())
	case reflect.Struct:
	default:
		return nil
	}
	switch w.state[t] {
	case walked:
		return nil
	case walking:
		if hasKeyValueTags(t) {
			return fmt.Errorf("type %s refers to itself: no schema can be generated for it", t)
		}
		return nil // jsonschema-go reports the cycle
	}
	w.state[t] = walking
	for _, f := range reflect.VisibleFields(t) {
		if f.IsExported() && !f.Anonymous {
			if err := w.walk(f.Type); err != nil {
				return err
			}
		}
	}
	w.state[t] = walked
	if !hasKeyValueTags(t) {
		return nil
	}
	s, err := w.structSchema(t)
	if err != nil {
		return err
	}
	w.overrides[t] = s
	return nil
}

// hasKeyValueTags reports whether a field of t carries an eino-style tag.
func hasKeyValueTags(t reflect.Type) bool {
	for _, f := range reflect.VisibleFields(t) {
		if f.Anonymous || !f.IsExported() {
			continue
		}
		if _, ok := f.Tag.Lookup("jsonschema_description"); ok {
			return true
		}
		if tag, ok := f.Tag.Lookup("jsonschema"); ok && einoTag(tag) {
			return true
		}
	}
	return false
}

// structSchema is jsonschema-go's schema of a struct, with both tag styles
// read.
func (w *tagWalker) structSchema(t reflect.Type) (*jsonschema.Schema, error) {
	s := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}
	for _, f := range reflect.VisibleFields(t) {
		if f.Anonymous || !f.IsExported() {
			continue // promoted fields come on their own, as in jsonschema-go
		}
		name, optional, omit := jsonField(f)
		if omit || f.Tag.Get("jsonschema") == "-" {
			continue
		}
		fs, err := jsonschema.ForType(f.Type, w.options())
		if err != nil {
			return nil, fmt.Errorf("field %s.%s: %w", t, f.Name, err)
		}
		required, err := applyTags(f, fs)
		if err != nil {
			return nil, fmt.Errorf("field %s.%s: %w", t, f.Name, err)
		}
		if _, seen := s.Properties[name]; seen {
			s.PropertyOrder = slices.DeleteFunc(s.PropertyOrder, func(n string) bool { return n == name })
			s.Required = slices.DeleteFunc(s.Required, func(n string) bool { return n == name })
		}
		s.Properties[name] = fs
		s.PropertyOrder = append(s.PropertyOrder, name)
		if !optional || required {
			s.Required = append(s.Required, name)
		}
	}
	return s, nil
}

// jsonField is a field's JSON name and whether encoding/json leaves it out
// when empty or always.
func jsonField(f reflect.StructField) (name string, optional, omit bool) {
	name = f.Name
	tag, ok := f.Tag.Lookup("json")
	if !ok {
		return name, false, false
	}
	n, opts, found := strings.Cut(tag, ",")
	if n == "-" && !found {
		return "", false, true
	}
	if n != "" {
		name = n
	}
	for _, o := range strings.Split(opts, ",") {
		if o == "omitempty" || o == "omitzero" {
			optional = true
		}
	}
	return name, optional, false
}

// applyTags sets fs from the field's jsonschema tags, in either style.
// required reports eino's bare word required.
func applyTags(f reflect.StructField, fs *jsonschema.Schema) (required bool, err error) {
	if d, ok := f.Tag.Lookup("jsonschema_description"); ok {
		fs.Description = d
	}
	tag, ok := f.Tag.Lookup("jsonschema")
	switch {
	case !ok:
		return false, nil
	case tag == "":
		return false, fmt.Errorf("empty jsonschema tag")
	case !einoTag(tag):
		fs.Description = tag // go-sdk's style
		return false, nil
	}
	for _, item := range splitTag(tag) {
		key, val, isPair := strings.Cut(item, "=")
		if !isPair {
			switch key {
			case "required":
				required = true
			case "nullable":
				if fs.Type != "" {
					fs.Types, fs.Type = []string{"null", fs.Type}, ""
				}
			case "":
			default:
				return false, fmt.Errorf("jsonschema tag %q: %q is not a key=value item tooldispatch reads", tag, key)
			}
			continue
		}
		target, kind := fs, baseKind(f.Type)
		if kind == reflect.Slice || kind == reflect.Array {
			// eino applies the keys of an array's items to the items.
			switch key {
			case "minItems", "maxItems", "uniqueItems", "description", "title":
			default:
				target, kind = fs.Items, baseKind(elemType(f.Type))
			}
		}
		if target == nil {
			return false, fmt.Errorf("jsonschema tag %q: %s has no item schema", tag, key)
		}
		if err := applyKey(target, kind, key, val); err != nil {
			return false, fmt.Errorf("jsonschema tag %q: %s: %w", tag, key, err)
		}
	}
	return required, nil
}

// applyKey sets one eino key on s, the schema of a value of kind.
func applyKey(s *jsonschema.Schema, kind reflect.Kind, key, val string) error {
	var err error
	switch key {
	case "description":
		s.Description = val
	case "title":
		s.Title = val
	case "enum", "example", "default":
		var v any
		if v, err = typedValue(kind, val); err != nil {
			break
		}
		switch key {
		case "enum":
			s.Enum = append(s.Enum, v)
		case "example":
			s.Examples = append(s.Examples, v)
		default:
			s.Default, err = json.Marshal(v)
		}
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf":
		if !isNumber(kind) {
			return fmt.Errorf("only numbers take it")
		}
		var n float64
		if n, err = strconv.ParseFloat(val, 64); err != nil {
			break
		}
		switch key {
		case "minimum":
			s.Minimum = &n
		case "maximum":
			s.Maximum = &n
		case "exclusiveMinimum":
			s.ExclusiveMinimum = &n
		case "exclusiveMaximum":
			s.ExclusiveMaximum = &n
		default:
			s.MultipleOf = &n
		}
	case "pattern", "format":
		if kind != reflect.String {
			return fmt.Errorf("only strings take it")
		}
		if key == "pattern" {
			s.Pattern = val
		} else {
			s.Format = val
		}
	case "minLength", "maxLength", "minItems", "maxItems":
		if strings.HasSuffix(key, "Length") && kind != reflect.String {
			return fmt.Errorf("only strings take it")
		}
		var n int
		if n, err = strconv.Atoi(val); err != nil {
			break
		}
		switch key {
		case "minLength":
			s.MinLength = &n
		case "maxLength":
			s.MaxLength = &n
		case "minItems":
			s.MinItems = &n
		default:
			s.MaxItems = &n
		}
	case "uniqueItems":
		s.UniqueItems, err = strconv.ParseBool(val)
	default:
		return fmt.Errorf("not a key tooldispatch reads (write the schema by hand in Tool.Schema)")
	}
	if err != nil {
		return fmt.Errorf("value %q: %w", val, err)
	}
	return nil
}

// typedValue reads an enum, default or example value for a value of kind.
func typedValue(kind reflect.Kind, val string) (any, error) {
	switch {
	case kind == reflect.String:
		return val, nil
	case kind == reflect.Bool:
		return strconv.ParseBool(val)
	case isInteger(kind):
		return strconv.ParseInt(val, 10, 64)
	case isNumber(kind):
		return strconv.ParseFloat(val, 64)
	}
	return nil, fmt.Errorf("values are read only for strings, numbers and booleans")
}

func isInteger(k reflect.Kind) bool {
	return k >= reflect.Int && k <= reflect.Uint64
}

func isNumber(k reflect.Kind) bool {
	return isInteger(k) || k == reflect.Float32 || k == reflect.Float64
}

// baseKind is the kind of t behind its pointers.
func baseKind(t reflect.Type) reflect.Kind {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind()
}

// elemType is the element type of a slice or array t, behind pointers.
func elemType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Elem()
}

// splitTag splits an eino tag at the commas that are not escaped (\,),
// unescaping them.
func splitTag(tag string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(tag); i++ {
		switch {
		case tag[i] == '\\' && i+1 < len(tag) && tag[i+1] == ',':
			cur.WriteByte(',')
			i++
		case tag[i] == ',':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(tag[i])
		}
	}
	return append(out, cur.String())
}
