package toolkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func mustCompile(t *testing.T, c *SchemaCache, schema string) *Schema {
	t.Helper()
	s, err := c.Compile([]byte(schema))
	if err != nil {
		t.Fatalf("Compile(%s): %v", schema, err)
	}
	return s
}

func TestSchemaCacheCompilesOnce(t *testing.T) {
	c := NewSchemaCache()
	buf := []byte(`{"type":"object","properties":{"q":{"type":"string"}}}`)
	s1, err := c.Compile(buf)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := c.Compile([]byte(string(buf)))
	if err != nil {
		t.Fatal(err)
	}
	if s1 != s2 {
		t.Error("the same schema text compiled twice")
	}
	other := mustCompile(t, c, `{"type":"object"}`)
	if other == s1 {
		t.Error("two schemas share one compiled Schema")
	}
	want := string(buf)
	buf[2] = 'X'
	if got := string(s1.Raw()); got != want {
		t.Errorf("Raw() = %s after the caller changed its buffer, want %s", got, want)
	}
	if s3 := mustCompile(t, c, want); s3 != s1 {
		t.Error("cache lost the schema after the caller changed its buffer")
	}
}

func TestSchemaCacheConcurrent(t *testing.T) {
	c := NewSchemaCache()
	schemas := []string{
		`{"type":"object","required":["a"]}`,
		`{"type":"object","properties":{"n":{"type":"integer","maximum":3}}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`,
	}
	var wg sync.WaitGroup
	got := make([][]*Schema, 8)
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				s, err := c.Compile([]byte(schemas[i%len(schemas)]))
				if err != nil {
					t.Error(err)
					return
				}
				_ = s.Validate(map[string]any{"n": jsonNumber("5")})
				if i < len(schemas) {
					got[g] = append(got[g], s)
				}
			}
		}()
	}
	wg.Wait()
	for g := range got {
		for i := range got[g] {
			if got[g][i] != got[0][i] {
				t.Fatalf("goroutine %d got another compiled schema for schema %d", g, i)
			}
		}
	}
}

func jsonNumber(s string) any {
	a, err := ParseArgs(`{"n":`+s+`}`, Limits{})
	if err != nil {
		panic(err)
	}
	return a.Value["n"]
}

func TestSchemaDrafts(t *testing.T) {
	const (
		draft7Header = `"$schema":"http://json-schema.org/draft-07/schema#",`
		draft2020    = `"$schema":"https://json-schema.org/draft/2020-12/schema",`
	)
	tests := []struct {
		name       string
		schema     string
		args       string
		wantValid  bool
		wantErrSub string // compile error, when set
	}{
		{
			name:      "draft-07 tuple items with additionalItems",
			schema:    `{` + draft7Header + `"properties":{"t":{"items":[{"type":"string"}],"additionalItems":false}}}`,
			args:      `{"t":["a",1]}`,
			wantValid: false,
		},
		{
			name:      "draft-07 tuple items accept a matching tuple",
			schema:    `{` + draft7Header + `"properties":{"t":{"items":[{"type":"string"}],"additionalItems":false}}}`,
			args:      `{"t":["a"]}`,
			wantValid: true,
		},
		{
			name:       "without $schema tuple items are not 2020-12",
			schema:     `{"properties":{"t":{"items":[{"type":"string"}]}}}`,
			wantErrSub: "schema:",
		},
		{
			name:      "2020-12 by default: prefixItems apply",
			schema:    `{"properties":{"t":{"prefixItems":[{"type":"string"}],"items":false}}}`,
			args:      `{"t":["a",1]}`,
			wantValid: false,
		},
		{
			name:      "draft-07 ignores prefixItems",
			schema:    `{` + draft7Header + `"properties":{"t":{"prefixItems":[{"type":"string"}],"items":false}}}`,
			args:      `{"t":[]}`,
			wantValid: true,
		},
		{
			name:      "explicit 2020-12",
			schema:    `{` + draft2020 + `"type":"object","dependentRequired":{"a":["b"]}}`,
			args:      `{"a":1}`,
			wantValid: false,
		},
		{
			name:      "draft-07 dependencies",
			schema:    `{` + draft7Header + `"type":"object","dependencies":{"a":["b"]}}`,
			args:      `{"a":1}`,
			wantValid: false,
		},
		{
			name:      "draft-07 definitions ref",
			schema:    `{` + draft7Header + `"definitions":{"pos":{"type":"integer","minimum":1}},"properties":{"n":{"$ref":"#/definitions/pos"}}}`,
			args:      `{"n":0}`,
			wantValid: false,
		},
		{
			name:      "2020-12 $defs ref",
			schema:    `{"$defs":{"pos":{"type":"integer","minimum":1}},"properties":{"n":{"$ref":"#/$defs/pos"}}}`,
			args:      `{"n":2}`,
			wantValid: true,
		},
		{
			name:      "draft-07 asserts formats",
			schema:    `{` + draft7Header + `"properties":{"e":{"type":"string","format":"email"}}}`,
			args:      `{"e":"not an address"}`,
			wantValid: false,
		},
		{
			name:      "2020-12 asserts formats too (one policy for every draft)",
			schema:    `{"properties":{"e":{"type":"string","format":"email"}}}`,
			args:      `{"e":"not an address"}`,
			wantValid: false,
		},
		{
			name:       "remote refs are refused",
			schema:     `{"properties":{"x":{"$ref":"https://example.com/schemas/x.json"}}}`,
			wantErrSub: "https://example.com/schemas/x.json is not loaded",
		},
		{
			name:       "file refs are refused",
			schema:     `{"properties":{"x":{"$ref":"file:///etc/passwd"}}}`,
			wantErrSub: "file:///etc/passwd is not loaded",
		},
		{
			name:       "relative refs are refused",
			schema:     `{"properties":{"x":{"$ref":"other.json"}}}`,
			wantErrSub: "is not loaded",
		},
		{
			name:       "not JSON",
			schema:     `{"type":`,
			wantErrSub: "schema is not valid JSON",
		},
		{
			name:       "invalid schema",
			schema:     `{"type":5}`,
			wantErrSub: "schema:",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewSchemaCache()
			s, err := c.Compile([]byte(tc.schema))
			if tc.wantErrSub != "" {
				if err == nil {
					t.Fatal("Compile accepted the schema")
				}
				if !strings.Contains(err.Error(), tc.wantErrSub) {
					t.Errorf("Compile error %q does not contain %q", err, tc.wantErrSub)
				}
				if _, err2 := c.Compile([]byte(tc.schema)); err2 == nil || err2.Error() != err.Error() {
					t.Errorf("second Compile = %v, want the same error", err2)
				}
				return
			}
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			err = s.Validate(mustParse(t, tc.args).Value)
			if got := err == nil; got != tc.wantValid {
				t.Errorf("valid = %v, want %v (%v)", got, tc.wantValid, err)
			}
		})
	}
}

// mapLoader serves schemas from memory.
type mapLoader map[string]string

func (m mapLoader) Load(url string) (any, error) {
	s, ok := m[url]
	if !ok {
		return nil, fmt.Errorf("no %s", url)
	}
	return jsonschema.UnmarshalJSON(strings.NewReader(s))
}

func TestSchemaInjectedLoader(t *testing.T) {
	c := NewSchemaCache(WithSchemaLoader(mapLoader{
		"https://schemas.example/pos.json": `{"type":"integer","minimum":1}`,
	}))
	s := mustCompile(t, c, `{"properties":{"n":{"$ref":"https://schemas.example/pos.json"}}}`)
	if err := s.Validate(mustParse(t, `{"n":3}`).Value); err != nil {
		t.Errorf("valid arguments refused: %v", err)
	}
	err := s.Validate(mustParse(t, `{"n":0}`).Value)
	if diff := cmp.Diff(`invalid arguments: field "n": must be >= 1, got 0`, fmt.Sprint(err)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := c.Compile([]byte(`{"$ref":"https://schemas.example/missing.json"}`)); err == nil {
		t.Error("a reference the loader cannot serve compiled")
	}
}

func TestSchemaDefaultDraftOption(t *testing.T) {
	c := NewSchemaCache(WithDefaultDraft(jsonschema.Draft7))
	s := mustCompile(t, c, `{"properties":{"t":{"items":[{"type":"string"}],"additionalItems":false}}}`)
	if err := s.Validate(mustParse(t, `{"t":["a","b"]}`).Value); err == nil {
		t.Error("draft-07 additionalItems not applied")
	}
}

func TestValidateMessages(t *testing.T) {
	const searchSchema = `{
		"type": "object",
		"properties": {
			"query": {"type": "string", "minLength": 2},
			"limit": {"type": "integer", "minimum": 1, "maximum": 50},
			"mode":  {"type": "string", "enum": ["search", "list", "select"]},
			"tags":  {"type": "array", "items": {"type": "string"}, "maxItems": 2, "uniqueItems": true}
		},
		"required": ["query"],
		"additionalProperties": false
	}`
	const orderSchema = `{
		"type": "object",
		"properties": {
			"order": {
				"type": "object",
				"properties": {
					"items": {
						"type": "array",
						"items": {
							"type": "object",
							"properties": {"qty": {"type": "integer", "minimum": 1}, "sku": {"type": "string", "pattern": "^[A-Z]{3}-\\d+$"}},
							"required": ["qty", "sku"]
						}
					}
				},
				"required": ["items"]
			}
		}
	}`
	tests := []struct {
		name   string
		schema string
		args   string
		want   string // "" means valid
	}{
		{
			name:   "valid",
			schema: searchSchema,
			args:   `{"query":"go","limit":10,"mode":"list","tags":["a"]}`,
		},
		{
			name:   "integer as json.Number with a fraction of zero is canonical 1",
			schema: searchSchema,
			args:   `{"query":"go","limit":1.0}`,
		},
		{
			name:   "the brief's example",
			schema: searchSchema,
			args:   `{"limit":"10","mode":"find","extra":1}`,
			want:   `invalid arguments: field "extra": not allowed (no additional properties); field "limit": want integer, got string; field "mode": must be one of "search", "list", "select"; missing required field "query"`,
		},
		{
			name:   "bounds and lengths",
			schema: searchSchema,
			args:   `{"query":"g","limit":51,"tags":["a","a","b"]}`,
			want:   `invalid arguments: field "limit": must be <= 50, got 51; field "query": at least 2 characters, got 1; field "tags": at most 2 items, got 3; field "tags": items must be unique, but items 0 and 1 are equal`,
		},
		{
			name:   "fraction for an integer",
			schema: searchSchema,
			args:   `{"query":"go","limit":2.5}`,
			want:   `invalid arguments: field "limit": want integer, got number`,
		},
		{
			name:   "wrong element type",
			schema: searchSchema,
			args:   `{"query":"go","tags":["a",7]}`,
			want:   `invalid arguments: field "tags[1]": want string, got number`,
		},
		{
			name:   "nested path",
			schema: orderSchema,
			args:   `{"order":{"items":[{"qty":1,"sku":"ABC-1"},{"qty":2,"sku":"ABD-2"},{"qty":0}]}}`,
			want:   `invalid arguments: field "order.items[2].qty": must be >= 1, got 0; missing required field "order.items[2].sku"`,
		},
		{
			name:   "array indexes sort numerically",
			schema: orderSchema,
			args:   `{"order":{"items":[{"qty":1,"sku":"A-1"},{"qty":1,"sku":"ABC-1"},{"qty":1,"sku":"ABC-1"},{"qty":1,"sku":"ABC-1"},{"qty":1,"sku":"ABC-1"},{"qty":1,"sku":"ABC-1"},{"qty":1,"sku":"ABC-1"},{"qty":1,"sku":"ABC-1"},{"qty":1,"sku":"ABC-1"},{"qty":1,"sku":"ABC-1"},{"qty":1,"sku":"x"}]}}`,
			want:   "invalid arguments: field \"order.items[0].sku\": must match pattern `^[A-Z]{3}-\\d+$`, got \"A-1\"; field \"order.items[10].sku\": must match pattern `^[A-Z]{3}-\\d+$`, got \"x\"",
		},
		{
			name:   "missing nested object",
			schema: orderSchema,
			args:   `{"order":{}}`,
			want:   `invalid arguments: missing required field "order.items"`,
		},
		{
			name:   "wrong nested type",
			schema: orderSchema,
			args:   `{"order":[]}`,
			want:   `invalid arguments: field "order": want object, got array`,
		},
		{
			name:   "nullable by type list",
			schema: `{"properties":{"x":{"type":["string","null"]}}}`,
			args:   `{"x":5}`,
			want:   `invalid arguments: field "x": want null or string, got number`,
		},
		{
			name:   "nullable by anyOf",
			schema: `{"properties":{"x":{"anyOf":[{"type":"string"},{"type":"null"}]}}}`,
			args:   `{"x":{}}`,
			want:   `invalid arguments: field "x": want string or null, got object`,
		},
		{
			name:   "anyOf keeps the alternative of the right type",
			schema: `{"properties":{"x":{"anyOf":[{"type":"string"},{"type":"object","required":["id"]}]}}}`,
			args:   `{"x":{}}`,
			want:   `invalid arguments: missing required field "x.id"`,
		},
		{
			name:   "oneOf with no match lists the forms",
			schema: `{"properties":{"x":{"oneOf":[{"type":"object","required":["a"]},{"type":"object","required":["b"]}]}}}`,
			args:   `{"x":{}}`,
			want:   `invalid arguments: field "x": matches none of the allowed forms: (1) missing required field "x.a", or (2) missing required field "x.b"`,
		},
		{
			name:   "oneOf with two matches",
			schema: `{"properties":{"x":{"oneOf":[{"type":"integer"},{"minimum":0}]}}}`,
			args:   `{"x":3}`,
			want:   `invalid arguments: field "x": matches more than one allowed form (1 and 2); it must match exactly one`,
		},
		{
			name:   "const and multipleOf and exclusive bounds",
			schema: `{"properties":{"v":{"const":"v1"},"m":{"multipleOf":0.5},"e":{"exclusiveMaximum":10}}}`,
			args:   `{"v":"v2","m":0.3,"e":10}`,
			want:   `invalid arguments: field "e": must be < 10, got 10; field "m": must be a multiple of 0.5, got 0.3; field "v": must be "v1"`,
		},
		{
			name:   "dependentRequired",
			schema: `{"properties":{"o":{"dependentRequired":{"start":["end"]}}}}`,
			args:   `{"o":{"start":1}}`,
			want:   `invalid arguments: missing field "o.end" (required when "o.start" is present)`,
		},
		{
			name:   "unevaluatedProperties",
			schema: `{"properties":{"a":{}},"unevaluatedProperties":false}`,
			args:   `{"a":1,"b":2}`,
			want:   `invalid arguments: field "b": not allowed`,
		},
		{
			name:   "keys that are not plain names",
			schema: `{"properties":{"a b":{"type":"string"},"x.y":{"type":"string"}}}`,
			args:   `{"a b":1,"x.y":2}`,
			want:   `invalid arguments: field "[\"a b\"]": want string, got number; field "[\"x.y\"]": want string, got number`,
		},
		{
			name:   "draft-07 format",
			schema: `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"email":{"type":"string","format":"email"}}}`,
			args:   `{"email":"nobody"}`,
			want:   `invalid arguments: field "email": must be a valid email, got "nobody"`,
		},
		{
			name:   "not",
			schema: `{"properties":{"n":{"not":{"type":"null"}}}}`,
			args:   `{"n":null}`,
			want:   `invalid arguments: field "n": must not match the excluded schema`,
		},
		{
			name:   "minProperties",
			schema: `{"minProperties":1}`,
			args:   `{}`,
			want:   `invalid arguments: arguments: at least 1 field, got 0`,
		},
		{
			name:   "enum of many values is cut",
			schema: `{"properties":{"n":{"enum":[` + enumValues(35) + `]}}}`,
			args:   `{"n":99}`,
			want:   `invalid arguments: field "n": must be one of ` + enumValues(30)[:len(enumValues(30))] + `, … (5 more)`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, NewSchemaCache(), tc.schema)
			err := s.Validate(mustParse(t, tc.args).Value)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate accepted the arguments")
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %T, want *ValidationError", err)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			var inner *jsonschema.ValidationError
			if !errors.As(err, &inner) {
				t.Error("the validator's own error is not reachable with errors.As")
			}
		})
	}
}

func enumValues(n int) string {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprint(i)
	}
	return strings.Join(vals, ", ")
}

func TestValidationErrorFields(t *testing.T) {
	s := mustCompile(t, NewSchemaCache(), `{"properties":{"a":{"type":"string"}},"required":["b"]}`)
	err := s.Validate(mustParse(t, `{"a":1}`).Value)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %T, want *ValidationError", err)
	}
	want := []FieldError{
		{Path: "a", Message: `field "a": want string, got number`},
		{Path: "b", Message: `missing required field "b"`},
	}
	if diff := cmp.Diff(want, ve.Fields); diff != "" {
		t.Errorf("Fields (-want +got):\n%s", diff)
	}
}

func TestValidateIsDeterministic(t *testing.T) {
	s := mustCompile(t, NewSchemaCache(), `{
		"type":"object",
		"properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"},"d":{"enum":[1,2]}},
		"required":["z","y","x"],
		"additionalProperties":false
	}`)
	args := mustParse(t, `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8}`)
	first := s.Validate(args.Value).Error()
	for range 100 {
		if got := s.Validate(args.Value).Error(); got != first {
			t.Fatalf("message changed between runs:\n%s\n%s", first, got)
		}
	}
	if !strings.Contains(first, `field "e": not allowed (no additional properties); field "f"`) {
		t.Errorf("additional properties not in order: %s", first)
	}
}

func TestValidateNilMap(t *testing.T) {
	s := mustCompile(t, NewSchemaCache(), `{"type":"object","required":["q"]}`)
	if diff := cmp.Diff(`invalid arguments: missing required field "q"`, fmt.Sprint(s.Validate(nil))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := mustCompile(t, NewSchemaCache(), `{"type":"object"}`).Validate(nil); err != nil {
		t.Errorf("nil arguments refused by an open schema: %v", err)
	}
}

// mutations returns variants of an arguments object: each field removed or
// replaced by values of every JSON type, nested fields changed the same way,
// and an extra field added.
func mutations(v map[string]any) []map[string]any {
	values := []any{"x", "", json.Number("1"), json.Number("-3"), json.Number("1.5"), true, nil,
		map[string]any{}, []any{}, []any{"x"}, []any{json.Number("2")}, map[string]any{"k": "v"}}
	var out []map[string]any
	with := func(k string, x any) map[string]any {
		m := maps.Clone(v)
		m[k] = x
		return m
	}
	for k, x := range v {
		m := maps.Clone(v)
		delete(m, k)
		out = append(out, m)
		for _, val := range values {
			out = append(out, with(k, val))
		}
		switch x := x.(type) {
		case map[string]any:
			for _, sub := range mutations(x) {
				out = append(out, with(k, sub))
			}
		case []any:
			if len(x) > 0 {
				if first, ok := x[0].(map[string]any); ok {
					for _, sub := range mutations(first) {
						out = append(out, with(k, append([]any{sub}, x[1:]...)))
					}
				}
				for _, val := range values {
					out = append(out, with(k, append([]any{val}, x[1:]...)))
				}
			}
		}
	}
	return append(out, with("zz_extra", "x"))
}

// TestFastPathAgreesWithValidator checks the fast path against the general
// validator on the τ-bench tools with mutated real calls.
func TestFastPathAgreesWithValidator(t *testing.T) {
	data := loadTauBench(t)
	cache := NewSchemaCache()
	eligible, tools, checked := 0, 0, 0
	for domain, d := range data {
		seen := map[string]bool{}
		for _, c := range d.Calls {
			if seen[c.Name] {
				continue
			}
			seen[c.Name] = true
			tools++
			s, err := cache.Compile(d.Tools[c.Name].Parameters)
			if err != nil {
				t.Fatal(err)
			}
			if s.fast == nil {
				continue
			}
			eligible++
			args := mustParse(t, argumentsText(t, c.Arguments))
			for _, m := range append(mutations(args.Value), args.Value) {
				checked++
				fast := s.fast.valid(m)
				slow := s.first.sch.Validate(m) == nil
				if fast != slow {
					t.Errorf("%s/%s: fast path says %v, validator %v for %v", domain, c.Name, fast, slow, m)
				}
			}
		}
	}
	t.Logf("fast path: %d of %d tau-bench tools with calls eligible, %d argument variants agree", eligible, tools, checked)
	if eligible == 0 {
		t.Error("no tau-bench tool takes the fast path")
	}

	raw, err := os.ReadFile(filepath.Join(sharedTestdata(t), "bfcl", "nonlive-sample-calls.json"))
	if err != nil {
		t.Fatal(err)
	}
	var calls []struct {
		ID          string          `json:"id"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Arguments   json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(raw, &calls); err != nil {
		t.Fatal(err)
	}
	eligible, checked = 0, 0
	for _, c := range calls {
		s, err := cache.Compile(c.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		if s.fast == nil {
			continue
		}
		eligible++
		args := mustParse(t, argumentsText(t, c.Arguments))
		for _, m := range append(mutations(args.Value), args.Value) {
			checked++
			fast := s.fast.valid(m)
			slow := s.first.sch.Validate(m) == nil
			if fast != slow {
				t.Errorf("bfcl %s: fast path says %v, validator %v for %v", c.ID, fast, slow, m)
			}
		}
	}
	t.Logf("fast path: %d of %d bfcl schemas eligible, %d argument variants agree", eligible, len(calls), checked)
}

func TestFastPathEligibility(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   bool
	}{
		{name: "plain object schema", schema: `{"type":"object","properties":{"a":{"type":"string","enum":["x"]},"b":{"type":"array","items":{"type":"integer"},"maxItems":3}},"required":["a"],"additionalProperties":false}`, want: true},
		{name: "draft-07 header", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`, want: true},
		{name: "draft-07 format is asserted", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"u":{"format":"uri"}}}`, want: false},
		{name: "2020-12 asserted format", schema: `{"properties":{"u":{"type":"string","format":"uri"}}}`, want: false},
		{name: "format not asserted by the policy", schema: `{"properties":{"u":{"type":"string","format":"semver"}}}`, want: true},
		{name: "refs", schema: `{"$defs":{"a":{}},"properties":{"a":{"$ref":"#/$defs/a"}}}`, want: false},
		{name: "numeric bounds", schema: `{"properties":{"n":{"minimum":1}}}`, want: false},
		{name: "number enum", schema: `{"properties":{"n":{"enum":[1,2]}}}`, want: false},
		{name: "anyOf", schema: `{"properties":{"n":{"anyOf":[{"type":"string"}]}}}`, want: false},
		{name: "vendor keyword", schema: `{"x-order":1,"type":"object"}`, want: false},
		{name: "unknown meta-schema", schema: `{"$schema":"https://example.com/meta","type":"object"}`, want: false},
		{name: "nested $schema", schema: `{"properties":{"a":{"$schema":"https://json-schema.org/draft/2020-12/schema"}}}`, want: false},
		{name: "boolean subschemas", schema: `{"properties":{"a":true,"b":false},"additionalProperties":false}`, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewSchemaCache(WithSchemaLoader(mapLoader{"https://example.com/meta": `{"$schema":"https://json-schema.org/draft/2020-12/schema"}`}))
			s := mustCompile(t, c, tc.schema)
			if got := s.fast != nil; got != tc.want {
				t.Errorf("fast path eligible = %v, want %v", got, tc.want)
			}
		})
	}
}
