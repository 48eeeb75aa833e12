package toolkit

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// goSDKIn is tagged the way go-sdk (google/jsonschema-go) reads tags: the
// whole tag is the description.
type goSDKIn struct {
	City string `json:"city" jsonschema:"the city, e.g. Berlin"`
}

// einoAddress is a nested struct tagged the way eino reads tags.
type einoAddress struct {
	Street string `json:"street" jsonschema:"description=street and number"`
	Zip    string `json:"zip,omitempty" jsonschema:"description=postal code,pattern=^[0-9]{5}$"`
}

// einoIn is tagged the way eino (eino-contrib/jsonschema) reads tags:
// key=value items, and the jsonschema_description tag.
type einoIn struct {
	City    string       `json:"city" jsonschema:"description=the city\\, or its airport code"`
	Nights  int          `json:"nights" jsonschema:"description=how many nights,minimum=1,maximum=30"`
	Room    string       `json:"room,omitempty" jsonschema:"description=the kind of room,enum=single,enum=double,default=single"`
	Note    string       `json:"note,omitempty" jsonschema_description:"a note for the hotel"`
	Guests  []string     `json:"guests,omitempty" jsonschema:"description=who stays,maxItems=4,minLength=1"`
	Pets    bool         `json:"pets,omitempty" jsonschema:"required"`
	Address einoAddress  `json:"address"`
	Later   *einoAddress `json:"later,omitempty"`
	Hidden  string       `json:"hidden,omitempty" jsonschema:"-"`
}

// mixedIn mixes both styles in one struct.
type mixedIn struct {
	From string `json:"from" jsonschema:"where the trip starts"`
	To   string `json:"to" jsonschema:"description=where it ends"`
}

// schemaOf returns Typed's schema of In, decoded.
func schemaOf[In any](t *testing.T) map[string]any {
	t.Helper()
	raw, err := SchemaFor[In]()
	if err != nil {
		t.Fatalf("SchemaFor: %v", err)
	}
	if _, err := NewSchemaCache().Compile(raw); err != nil {
		t.Fatalf("the schema does not compile: %v\n%s", err, raw)
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func prop(s map[string]any, path ...string) map[string]any {
	for _, p := range path {
		s, _ = s["properties"].(map[string]any)[p].(map[string]any)
	}
	return s
}

// TestTypedReadsBothTagStyles: a go-sdk struct, an eino struct and one
// that mixes both give the descriptions and constraints their tags say.
func TestTypedReadsBothTagStyles(t *testing.T) {
	if got := prop(schemaOf[goSDKIn](t), "city")["description"]; got != "the city, e.g. Berlin" {
		t.Errorf("go-sdk style: city description %v", got)
	}
	mixed := schemaOf[mixedIn](t)
	if prop(mixed, "from")["description"] != "where the trip starts" || prop(mixed, "to")["description"] != "where it ends" {
		t.Errorf("mixed styles: %v", mixed["properties"])
	}

	s := schemaOf[einoIn](t)
	for _, tt := range []struct {
		path []string
		key  string
		want any
	}{
		{[]string{"city"}, "description", "the city, or its airport code"},
		{[]string{"nights"}, "description", "how many nights"},
		{[]string{"nights"}, "minimum", 1.0},
		{[]string{"nights"}, "maximum", 30.0},
		{[]string{"room"}, "enum", []any{"single", "double"}},
		{[]string{"room"}, "default", "single"},
		{[]string{"note"}, "description", "a note for the hotel"},
		{[]string{"guests"}, "description", "who stays"},
		{[]string{"guests"}, "maxItems", 4.0},
		{[]string{"address", "street"}, "description", "street and number"},
		{[]string{"address", "zip"}, "pattern", "^[0-9]{5}$"},
		{[]string{"later", "street"}, "description", "street and number"},
	} {
		if got := prop(s, tt.path...)[tt.key]; !cmp.Equal(got, tt.want) {
			t.Errorf("%s.%s = %v, want %v", strings.Join(tt.path, "."), tt.key, got, tt.want)
		}
	}
	if got := prop(s, "guests")["items"].(map[string]any)["minLength"]; got != 1.0 {
		t.Errorf("guests items minLength = %v, want 1 (eino puts item keys on the items)", got)
	}
	if diff := cmp.Diff([]any{"city", "nights", "pets", "address"}, s["required"]); diff != "" {
		t.Errorf("required (-want +got):\n%s", diff)
	}
	if _, ok := s["properties"].(map[string]any)["hidden"]; ok {
		t.Error(`a field tagged jsonschema:"-" is in the schema`)
	}
	if s["additionalProperties"] != false {
		t.Errorf("additionalProperties %v, want false", s["additionalProperties"])
	}
}

// TestTypedValidatesEinoConstraints: the constraints of eino tags are
// checked by the dispatcher's validator like any schema's.
func TestTypedValidatesEinoConstraints(t *testing.T) {
	tool := Typed(Tool{Name: "book"}, func(_ context.Context, in einoIn) (string, error) { return in.City, nil })
	schema, err := NewSchemaCache().Compile(tool.Schema)
	if err != nil {
		t.Fatal(err)
	}
	valid := `{"city":"Lisbon","nights":3,"room":"double","pets":false,"address":{"street":"Rua 1","zip":"12345"}}`
	for name, tt := range map[string]struct {
		args   string
		errHas string
	}{
		"valid":          {valid, ""},
		"too few nights": {strings.Replace(valid, `"nights":3`, `"nights":0`, 1), "nights"},
		"not in enum":    {strings.Replace(valid, `"double"`, `"suite"`, 1), "room"},
		"bad zip":        {strings.Replace(valid, `"12345"`, `"1234"`, 1), "zip"},
		"pets required":  {strings.Replace(valid, `"pets":false,`, ``, 1), "pets"},
	} {
		a, err := ParseArgs(tt.args, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		err = schema.Validate(a.Value)
		switch {
		case tt.errHas == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tt.errHas != "" && (err == nil || !strings.Contains(err.Error(), tt.errHas)):
			t.Errorf("%s: %v, want an error naming %s", name, err, tt.errHas)
		}
	}
}

// TestTypedRefusesEinoKeysItCannotRead: a key Typed does not read is a
// registration error that names it, never a dropped constraint.
func TestTypedRefusesEinoKeysItCannotRead(t *testing.T) {
	type oneOf struct {
		V string `json:"v" jsonschema:"description=a value,oneof_type=string;integer"`
	}
	type badNumber struct {
		N int `json:"n" jsonschema:"minimum=one"`
	}
	type boundOnString struct {
		S string `json:"s" jsonschema:"maximum=3"`
	}
	type self struct {
		Next *self `json:"next,omitempty" jsonschema:"description=the next one"`
	}
	for name, tt := range map[string]struct {
		schema func() error
		want   string
	}{
		"oneof_type":        {func() error { _, err := SchemaFor[oneOf](); return err }, "oneof_type: not a key tooldispatch reads"},
		"minimum=one":       {func() error { _, err := SchemaFor[badNumber](); return err }, `minimum: value "one"`},
		"maximum on string": {func() error { _, err := SchemaFor[boundOnString](); return err }, "maximum: only numbers take it"},
		"recursive":         {func() error { _, err := SchemaFor[self](); return err }, "refers to itself"},
	} {
		if err := tt.schema(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tt.want)
		}
	}
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "oneof_type") {
			t.Fatalf("Typed with an unreadable key: panic %v, want one naming oneof_type", r)
		}
	}()
	Typed(Tool{Name: "bad"}, func(context.Context, oneOf) (string, error) { return "", nil })
}
