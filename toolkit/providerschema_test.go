package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProviderSchemaRules: one case per conversion rule (providerschema.go),
// for each format it concerns. want is the converted schema, exactly (key
// order included), or refused the reason's text.
func TestProviderSchemaRules(t *testing.T) {
	tests := []struct {
		name    string
		format  ToolsFormat
		schema  string
		want    string
		refused string
	}{
		// Every format.
		{name: "openai keeps the schema as it is", format: ToolsOpenAI,
			schema: `{"type":"object","patternProperties":{"^x":{}}}`, want: `{"type":"object","patternProperties":{"^x":{}}}`},
		{name: "a root without a type is an object", format: ToolsAnthropic,
			schema: `{"properties":{"a":{"type":"string"}},"patternProperties":{"^x":{}}}`, want: `{"properties":{"a":{"type":"string"}},"patternProperties":{"^x":{}},"type":"object"}`},
		{name: "a root that is not an object is refused", format: ToolsAnthropic,
			schema: `{"type":"array"}`, refused: "the root must be an object schema"},
		{name: "$schema, $id and $defs leave once $refs are inlined", format: ToolsAnthropic,
			schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","type":"object","properties":{"a":{"$ref":"#/$defs/s","description":"A."}},"$defs":{"s":{"type":"string"}}}`,
			want:   `{"type":"object","properties":{"a":{"type":"string","description":"A."}}}`},
		{name: "a recursive $ref is refused", format: ToolsGemini,
			schema:  `{"type":"object","properties":{"node":{"$ref":"#/definitions/n"}},"definitions":{"n":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/definitions/n"}}}}}}`,
			refused: "refers to itself"},
		{name: "a remote $ref is refused", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`, refused: "is not a reference inside the schema"},
		{name: "a $ref that points nowhere is refused", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`, refused: "points nowhere"},
		{name: "allOf is refused", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"a":{"allOf":[{"type":"string"}]}}}`, refused: "at /properties/a, allOf cannot be expressed"},
		{name: "not is refused", format: ToolsGemini, schema: `{"type":"object","properties":{"a":{"type":"string","not":{"const":"x"}}}}`, refused: "not cannot be expressed"},
		{name: "if/then/else is refused", format: ToolsResponses, schema: `{"type":"object","if":{},"then":{}}`, refused: "if cannot be expressed"},
		{name: "patternProperties is refused", format: ToolsGemini, schema: `{"type":"object","patternProperties":{"^x":{"type":"string"}}}`, refused: "patternProperties cannot be expressed"},
		{name: "dependentRequired is refused", format: ToolsOpenAIStrict, schema: `{"type":"object","properties":{"a":{"type":"string"}},"dependentRequired":{"a":["b"]}}`, refused: "dependentRequired cannot be expressed"},
		{name: "a tuple is refused", format: ToolsGemini, schema: `{"type":"object","properties":{"p":{"type":"array","items":[{"type":"string"}]}}}`, refused: "a tuple"},
		{name: "an overlapping oneOf is refused", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"oneOf":[{"required":["a"]},{"required":["b"]}]}`, refused: "oneOf whose alternatives may overlap"},

		// Strict formats.
		{name: "strict: every property required, optional ones nullable, no extra properties", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer","minimum":1}},"required":["q"]}`,
			want:   `{"type":"object","properties":{"q":{"type":"string"},"n":{"type":["integer","null"],"minimum":1}},"required":["q","n"],"additionalProperties":false}`},
		{name: "strict: an optional enum takes null", format: ToolsResponses,
			schema: `{"type":"object","properties":{"m":{"type":"string","enum":["a","b"]}},"additionalProperties":false}`,
			want:   `{"type":"object","properties":{"m":{"type":["string","null"],"enum":["a","b",null]}},"additionalProperties":false,"required":["m"]}`},
		{name: "strict: an optional anyOf gets a null alternative", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`,
			want:   `{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"},{"type":"null"}]}},"required":["v"],"additionalProperties":false}`},
		{name: "strict: a property that already takes null is left as it is", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"v":{"type":["string","null"]}}}`,
			want:   `{"type":"object","properties":{"v":{"type":["string","null"]}},"required":["v"],"additionalProperties":false}`},
		{name: "strict: nested objects and items are made strict too", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"todos":{"type":"array","maxItems":3,"items":{"type":"object","properties":{"id":{"type":"string"},"done":{"type":"boolean"}},"required":["done"]}}},"required":["todos"]}`,
			want:   `{"type":"object","properties":{"todos":{"type":"array","maxItems":3,"items":{"type":"object","properties":{"id":{"type":["string","null"]},"done":{"type":"boolean"}},"required":["id","done"],"additionalProperties":false}}},"required":["todos"],"additionalProperties":false}`},
		{name: "strict: const becomes a one-value enum", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"k":{"const":"x"}},"required":["k"]}`,
			want:   `{"type":"object","properties":{"k":{"enum":["x"]}},"required":["k"],"additionalProperties":false}`},
		{name: "strict: a oneOf of distinct types becomes anyOf", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"type":"boolean"}]}},"required":["v"]}`,
			want:   `{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"boolean"}]}},"required":["v"],"additionalProperties":false}`},
		{name: "strict: a free-form object beside a string leaves the string", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"arguments":{"type":["object","string"],"description":"Args."}},"required":["arguments"]}`,
			want:   `{"type":"object","properties":{"arguments":{"type":"string","description":"Args. [an object is given as its JSON text]"}},"required":["arguments"],"additionalProperties":false}`},
		{name: "strict: several types become anyOf, each with its keywords", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"v":{"type":["string","integer","null"],"maxLength":3,"minimum":0,"description":"V."}},"required":["v"]}`,
			want:   `{"type":"object","properties":{"v":{"description":"V.","anyOf":[{"type":"string","maxLength":3},{"type":"integer","minimum":0},{"type":"null"}]}},"required":["v"],"additionalProperties":false}`},
		{name: "strict: an unsupported format, default, examples and uniqueItems go to the description", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"u":{"type":"string","format":"uri","default":"a","examples":["b"],"deprecated":true},"d":{"type":"string","format":"date"},"l":{"type":"array","items":{"type":"string"},"uniqueItems":true,"description":"L."}},"required":["u","d","l"],"minProperties":1}`,
			want:   `{"type":"object","properties":{"u":{"type":"string","description":"[default: \"a\"; examples: [\"b\"]; format: \"uri\"]"},"d":{"type":"string","format":"date"},"l":{"type":"array","items":{"type":"string"},"description":"L. [uniqueItems: true]"}},"required":["u","d","l"],"additionalProperties":false,"description":"[minProperties: 1]"}`},
		{name: "strict: a map is refused", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"headers":{"type":"object","additionalProperties":{"type":"string"}}}}`, refused: "at /properties/headers, a map"},
		{name: "strict: a free-form object is refused", format: ToolsResponses,
			schema: `{"type":"object","properties":{"data":{"type":"object"}}}`, refused: "at /properties/data, a free-form object"},
		{name: "strict: a free-form root is refused", format: ToolsResponses, schema: `{"type":"object"}`, refused: "at the root, a free-form object"},
		{name: "strict: a root that declares no properties takes none", format: ToolsResponses,
			schema: `{"type":"object","properties":{},"required":[]}`, want: `{"type":"object","properties":{},"required":[],"additionalProperties":false}`},
		{name: "strict: an array without items is refused", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"l":{"type":"array"}}}`, refused: "an array needs an items schema"},
		{name: "strict: a value of any type is refused", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"x":{"description":"Anything."}}}`, refused: "a schema without a type"},
		{name: "strict: a required property not declared is refused", format: ToolsOpenAIStrict,
			schema: `{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`, refused: `required property "b" is not declared`},
		{name: "strict: anyOf at the root is refused", format: ToolsOpenAIStrict,
			schema: `{"type":"object","anyOf":[{"properties":{"a":{"type":"string"}}}]}`, refused: "anyOf at the root"},

		// Gemini.
		{name: "gemini: types in Gemini's enum, nullable, property order, no additionalProperties", format: ToolsGemini,
			schema: `{"type":"object","properties":{"z":{"type":["string","null"]},"a":{"type":"integer","minimum":1}},"required":["a"],"additionalProperties":false}`,
			want:   `{"type":"OBJECT","properties":{"z":{"type":"STRING","nullable":true},"a":{"type":"INTEGER","minimum":1}},"required":["a"],"propertyOrdering":["z","a"]}`},
		{name: "gemini: int64 bounds are strings", format: ToolsGemini,
			schema: `{"type":"object","properties":{"s":{"type":"string","minLength":1,"maxLength":9},"l":{"type":"array","items":{"type":"number"},"minItems":0,"maxItems":4}}}`,
			want:   `{"type":"OBJECT","properties":{"s":{"type":"STRING","minLength":"1","maxLength":"9"},"l":{"type":"ARRAY","items":{"type":"NUMBER"},"minItems":"0","maxItems":"4"}},"propertyOrdering":["s","l"]}`},
		{name: "gemini: exclusive bounds, multipleOf and uniqueItems go to the description", format: ToolsGemini,
			schema: `{"type":"object","properties":{"n":{"type":"number","exclusiveMinimum":0,"multipleOf":5}}}`,
			want:   `{"type":"OBJECT","properties":{"n":{"type":"NUMBER","description":"[exclusiveMinimum: 0; multipleOf: 5]"}}}`},
		{name: "gemini: string enums stay, others go to the description, null makes nullable", format: ToolsGemini,
			schema: `{"type":"object","properties":{"m":{"enum":["a","b",null]},"k":{"type":"integer","enum":[1,2]}}}`,
			want:   `{"type":"OBJECT","properties":{"m":{"enum":["a","b"],"nullable":true,"type":"STRING"},"k":{"type":"INTEGER","description":"[enum: [1,2]]"}},"propertyOrdering":["m","k"]}`},
		{name: "gemini: const string becomes a one-value enum", format: ToolsGemini,
			schema: `{"type":"object","properties":{"k":{"type":"string","const":"x"}}}`,
			want:   `{"type":"OBJECT","properties":{"k":{"type":"STRING","enum":["x"]}}}`},
		{name: "gemini: date-time stays, other formats go to the description; default stays, examples become example", format: ToolsGemini,
			schema: `{"type":"object","properties":{"t":{"type":"string","format":"date-time"},"e":{"type":"string","format":"email","default":"a@b.c","examples":["x@y.z"]}}}`,
			want:   `{"type":"OBJECT","properties":{"t":{"type":"STRING","format":"date-time"},"e":{"type":"STRING","default":"a@b.c","example":"x@y.z","description":"[format: \"email\"]"}},"propertyOrdering":["t","e"]}`},
		{name: "gemini: several types become anyOf", format: ToolsGemini,
			schema: `{"type":"object","properties":{"v":{"type":["string","boolean"]}}}`,
			want:   `{"type":"OBJECT","properties":{"v":{"anyOf":[{"type":"STRING"},{"type":"BOOLEAN"}]}}}`},
		{name: "gemini: a free-form object beside a string leaves the string", format: ToolsGemini,
			schema: `{"type":"object","properties":{"arguments":{"type":["object","string"]}}}`,
			want:   `{"type":"OBJECT","properties":{"arguments":{"type":"STRING","description":"[an object is given as its JSON text]"}}}`},
		{name: "gemini: a map is refused", format: ToolsGemini,
			schema: `{"type":"object","properties":{"h":{"type":"object","additionalProperties":{"type":"string"}}}}`, refused: "at /properties/h, a map"},
		{name: "gemini: a free-form object is refused", format: ToolsGemini,
			schema: `{"type":"object","properties":{"d":{"type":"object"}}}`, refused: "at /properties/d, a free-form object"},
		{name: "gemini: an array without items is refused", format: ToolsGemini,
			schema: `{"type":"object","properties":{"l":{"type":"array"}}}`, refused: "an array needs an items schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ProviderSchema(json.RawMessage(tt.schema), tt.format)
			if tt.refused != "" {
				var r *SchemaRefusal
				if !errors.As(err, &r) || !errors.Is(err, ErrSchemaRefused) || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("got %s, %v; want a refusal containing %q", got, err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("converted schema (-want +got):\n%s", diff)
			}
			if tt.format != ToolsOpenAI {
				checkSubset(t, tt.format, got)
			}
		})
	}
}

// checkSubset fails t if schema breaks format's rules (SubsetViolations).
func checkSubset(t *testing.T, format ToolsFormat, schema json.RawMessage) {
	t.Helper()
	for _, p := range SubsetViolations(format, schema) {
		t.Errorf("%s: %s", format, p)
	}
}

// TestStrictArgs: in a strict format a null for an optional property that
// does not take null is dropped before validation, wherever it nests; a
// null the full schema allows stays; other formats keep every null.
func TestStrictArgs(t *testing.T) {
	tool := &Tool{Name: "t", Schema: json.RawMessage(`{"type":"object","properties":{` +
		`"q":{"type":"string"},"maybe":{"type":["string","null"]},` +
		`"todos":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"},"done":{"type":"boolean"}},"required":["done"]}},` +
		`"opt":{"type":"object","properties":{"deep":{"type":"integer"}}}},"required":["q"]}`)}
	reg := NewRegistry()
	v, err := NewView(reg, "openai", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := `{"q":"x","maybe":null,"todos":[{"id":null,"done":true}],"opt":{"deep":null}}`
	tests := []struct {
		format ToolsFormat
		want   string
	}{
		{ToolsOpenAIStrict, `{"maybe":null,"opt":{},"q":"x","todos":[{"done":true}]}`},
		{ToolsResponses, `{"maybe":null,"opt":{},"q":"x","todos":[{"done":true}]}`},
		{ToolsOpenAI, `{"maybe":null,"opt":{"deep":null},"q":"x","todos":[{"done":true,"id":null}]}`},
		{ToolsGemini, `{"maybe":null,"opt":{"deep":null},"q":"x","todos":[{"done":true,"id":null}]}`},
	}
	for _, tt := range tests {
		t.Run(string(tt.format), func(t *testing.T) {
			a, err := ParseArgs(in, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := v.WithFormat(tt.format).StrictArgs(tool, a, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Canonical) != tt.want {
				t.Errorf("arguments %s, want %s", got.Canonical, tt.want)
			}
		})
	}
	// The parsed arguments themselves are not changed.
	a, _ := ParseArgs(in, Limits{})
	if _, err := v.WithFormat(ToolsResponses).StrictArgs(tool, a, Limits{}); err != nil || a.Value["q"] != "x" || len(a.Value) != 4 {
		t.Errorf("StrictArgs changed its input: %v, %v", a.Value, err)
	}
}

// TestArrayInShapes: each format's tools array entry has the provider's
// shape; a refused tool is listed with its reason; a Gemini name must
// start with a letter or an underscore; a tool without arguments goes
// without Gemini parameters.
func TestArrayInShapes(t *testing.T) {
	reg := NewRegistry()
	for _, tool := range []Tool{
		{Name: "alpha", Description: "A.", Schema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`), AlwaysInArray: true},
		{Name: "bare", Description: "B.", Schema: json.RawMessage(`{"type":"object","properties":{}}`), AlwaysInArray: true},
		{Name: "9lives", Description: "N.", Schema: json.RawMessage(`{"type":"object","properties":{}}`), AlwaysInArray: true},
		{Name: "mapper", Description: "M.", Schema: json.RawMessage(`{"type":"object","properties":{"h":{"type":"object","additionalProperties":{"type":"string"}}}}`), AlwaysInArray: true},
	} {
		tool.Handler = func(context.Context, *Call) (Result, error) { return Result{}, nil }
		reg.Register(tool)
	}
	v, err := NewView(reg, "openai", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		format  ToolsFormat
		want    string
		refused []string
	}{
		{ToolsOpenAI, `[{"type":"function","function":{"name":"9lives","description":"N.","parameters":{"type":"object","properties":{}}}},` +
			`{"type":"function","function":{"name":"alpha","description":"A.","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}},` +
			`{"type":"function","function":{"name":"bare","description":"B.","parameters":{"type":"object","properties":{}}}},` +
			`{"type":"function","function":{"name":"mapper","description":"M.","parameters":{"type":"object","properties":{"h":{"type":"object","additionalProperties":{"type":"string"}}}}}}]`, nil},
		{ToolsOpenAIStrict, `[{"type":"function","function":{"name":"9lives","description":"N.","parameters":{"type":"object","properties":{},"required":[],"additionalProperties":false},"strict":true}},` +
			`{"type":"function","function":{"name":"alpha","description":"A.","parameters":{"type":"object","properties":{"q":{"type":["string","null"]}},"required":["q"],"additionalProperties":false},"strict":true}},` +
			`{"type":"function","function":{"name":"bare","description":"B.","parameters":{"type":"object","properties":{},"required":[],"additionalProperties":false},"strict":true}}]`, []string{"mapper"}},
		{ToolsResponses, `[{"type":"function","name":"9lives","description":"N.","parameters":{"type":"object","properties":{},"required":[],"additionalProperties":false},"strict":true},` +
			`{"type":"function","name":"alpha","description":"A.","parameters":{"type":"object","properties":{"q":{"type":["string","null"]}},"required":["q"],"additionalProperties":false},"strict":true},` +
			`{"type":"function","name":"bare","description":"B.","parameters":{"type":"object","properties":{},"required":[],"additionalProperties":false},"strict":true}]`, []string{"mapper"}},
		{ToolsAnthropic, `[{"name":"9lives","description":"N.","input_schema":{"type":"object","properties":{}}},` +
			`{"name":"alpha","description":"A.","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}},` +
			`{"name":"bare","description":"B.","input_schema":{"type":"object","properties":{}}},` +
			`{"name":"mapper","description":"M.","input_schema":{"type":"object","properties":{"h":{"type":"object","additionalProperties":{"type":"string"}}}}}]`, nil},
		{ToolsGemini, `[{"functionDeclarations":[{"name":"alpha","description":"A.","parameters":{"type":"OBJECT","properties":{"q":{"type":"STRING"}}}},` +
			`{"name":"bare","description":"B."}]}]`, []string{"9lives", "mapper"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.format), func(t *testing.T) {
			arr, refused := v.ArrayIn(tt.format)
			b, err := json.Marshal(arr)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(b)); diff != "" {
				t.Errorf("array (-want +got):\n%s", diff)
			}
			var names []string
			for _, r := range refused {
				names = append(names, r.Name)
				if !strings.Contains(r.Reason, "cannot be given as "+string(tt.format)) {
					t.Errorf("refusal of %s: %q", r.Name, r.Reason)
				}
			}
			if diff := cmp.Diff(tt.refused, names); diff != "" {
				t.Errorf("refused (-want +got):\n%s", diff)
			}
		})
	}
}
