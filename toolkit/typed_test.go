package toolkit

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type weatherIn struct {
	City  string   `json:"city" jsonschema:"the city, e.g. Berlin"`
	Days  int      `json:"days,omitempty"`
	Units string   `json:"units,omitzero"`
	Tags  []string `json:"tags,omitempty"`
}

type weatherOut struct {
	City  string  `json:"city"`
	TempC float64 `json:"temp_c"`
}

func TestSchemaForStruct(t *testing.T) {
	raw, err := SchemaFor[weatherIn]()
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Type       string                    `json:"type"`
		Required   []string                  `json:"required"`
		Properties map[string]map[string]any `json:"properties"`
		Additional any                       `json:"additionalProperties"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != "object" {
		t.Errorf("type %q, want object", s.Type)
	}
	if diff := cmp.Diff([]string{"city"}, s.Required); diff != "" {
		t.Errorf("required (-want +got):\n%s", diff)
	}
	if s.Additional != false {
		t.Errorf("additionalProperties %v, want false", s.Additional)
	}
	if got := s.Properties["city"]["description"]; got != "the city, e.g. Berlin" {
		t.Errorf("city description %v", got)
	}
	if got := s.Properties["days"]["type"]; got != "integer" {
		t.Errorf("days type %v", got)
	}
	// The registry compiles it like any hand-written schema.
	if _, err := NewSchemaCache().Compile(raw); err != nil {
		t.Fatalf("generated schema does not compile: %v", err)
	}
}

func TestSchemaForRefusesNonObjects(t *testing.T) {
	for name, f := range map[string]func() error{
		"string":     func() error { _, err := SchemaFor[string](); return err },
		"slice":      func() error { _, err := SchemaFor[[]int](); return err },
		"int map":    func() error { _, err := SchemaFor[map[int]string](); return err },
		"func field": func() error { _, err := SchemaFor[struct{ F func() }](); return err },
	} {
		if f() == nil {
			t.Errorf("%s: no error", name)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Typed with a string In did not panic")
		}
	}()
	Typed(Tool{Name: "bad"}, func(context.Context, string) (string, error) { return "", nil })
}

func TestTypedHandlerDecodesCanonicalArgs(t *testing.T) {
	var got weatherIn
	var emitted []string
	tool := Typed(Tool{Name: "weather", Description: "Weather.", Concurrent: true, ReadOnly: true},
		func(ctx context.Context, in weatherIn) (weatherOut, error) {
			got = in
			Progress(ctx, "looking up "+in.City)
			if c := CallFromContext(ctx); c == nil || c.ID != "c1" {
				t.Errorf("CallFromContext = %v", c)
			}
			return weatherOut{City: in.City, TempC: 21.5}, nil
		})
	if !tool.Concurrent || !tool.ReadOnly || tool.Name != "weather" {
		t.Fatalf("flags lost: %+v", tool)
	}
	reg := NewRegistry()
	reg.Register(tool)
	args, err := ParseArgs(`{ "tags":["a"], "days": 3, "city": "Berlin" }`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	c := &Call{ID: "c1", Name: "weather", Args: args, Emit: func(s string) { emitted = append(emitted, s) }}
	res, err := tool.Handler(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(weatherIn{City: "Berlin", Days: 3, Tags: []string{"a"}}, got); diff != "" {
		t.Errorf("decoded In (-want +got):\n%s", diff)
	}
	if res.Content != `{"city":"Berlin","temp_c":21.5}` {
		t.Errorf("content %s", res.Content)
	}
	if diff := cmp.Diff([]string{"looking up Berlin"}, emitted); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}

func TestTypedOutputs(t *testing.T) {
	run := func(tool Tool) (Result, error) {
		return tool.Handler(context.Background(), &Call{Args: Args{Canonical: []byte(`{}`)}, Emit: func(string) {}})
	}
	type none struct{}
	res, err := run(Typed(Tool{Name: "s"}, func(context.Context, none) (string, error) { return "plain text", nil }))
	if err != nil || res.Content != "plain text" {
		t.Errorf("string out: %q %v", res.Content, err)
	}
	res, err = run(Typed(Tool{Name: "r"}, func(context.Context, none) (Result, error) {
		return Result{Content: "x", Fetched: []string{"y"}}, nil
	}))
	if err != nil || res.Content != "x" || len(res.Fetched) != 1 {
		t.Errorf("Result out: %+v %v", res, err)
	}
	res, err = run(Typed(Tool{Name: "j"}, func(context.Context, none) (json.RawMessage, error) { return json.RawMessage(`[1]`), nil }))
	if err != nil || res.Content != "[1]" {
		t.Errorf("raw out: %q %v", res.Content, err)
	}
	_, err = run(Typed(Tool{Name: "e"}, func(context.Context, none) (int, error) { return 0, errFake }))
	if err != errFake {
		t.Errorf("error out: %v", err)
	}
	_, err = run(Typed(Tool{Name: "c"}, func(context.Context, none) (chan int, error) { return nil, nil }))
	if err == nil || !strings.Contains(err.Error(), "encoding the result") {
		t.Errorf("unencodable out: %v", err)
	}
}

var errFake = &ArgsError{Msg: "fake", Offset: -1}

func TestDecodeNamesTheField(t *testing.T) {
	// Validation refuses this long before a handler runs; Decode still
	// says which field did not fit when called on its own.
	args, err := ParseArgs(`{"city":"x","days":"three"}`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Decode[weatherIn](args)
	if err == nil || !strings.Contains(err.Error(), `"days"`) {
		t.Fatalf("Decode error %v, want one naming days", err)
	}
}
