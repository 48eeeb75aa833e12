package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// TypedHandler runs one call of a typed tool. In is decoded from the call's
// canonical arguments after they validated against the schema generated from
// In. The returned Out becomes the tool's content: a string as it is, a
// Result as it is, json.RawMessage as its bytes, anything else as its JSON
// encoding. A returned error becomes status error with the error's text.
//
// CallFromContext(ctx) gives the call itself (session, call id, Emit for
// progress, Ask for questions to the human).
type TypedHandler[In, Out any] func(ctx context.Context, in In) (Out, error)

// Typed returns t with its Schema and Handler made from fn: the schema is
// generated from In by github.com/google/jsonschema-go (struct fields by their
// json names; fields tagged omitempty or omitzero are optional, every other
// field is required; unknown fields are refused), and the handler decodes In
// from the canonical arguments, never from the text the model sent. A
// `jsonschema` tag is read in go-sdk's style (`jsonschema:"the city"`, the
// description) or in eino's (`jsonschema:"description=the city,enum=…"`),
// so one input struct serves tooldispatch whichever it was written for (see
// typed_tags.go for the keys read; an unknown key panics, it is never
// dropped).
//
// Every other field of t (Name, Description, Concurrent, ReadOnly, Timeout,
// Paths, AlwaysInArray, …) is kept, so flags are set as for any tool:
//
//	reg.Register(toolkit.Typed(toolkit.Tool{Name: "weather",
//		Description: "Current weather of a city.", Concurrent: true, ReadOnly: true},
//		func(ctx context.Context, in WeatherIn) (WeatherOut, error) { … }))
//
// The call is validated by the same compiled schema as every other tool, in
// the dispatcher's preflight: a call with a wrong-typed field gets
// invalid_args naming the field and never reaches fn.
//
// In must be a struct (or a map with string keys) whose schema
// jsonschema-go can build; otherwise Typed panics, like any registration
// mistake. A t.Schema already set is kept (for hand-tuned schemas) and must
// describe what In decodes.
func Typed[In, Out any](t Tool, fn TypedHandler[In, Out]) Tool {
	if fn == nil {
		panic(fmt.Sprintf("toolkit: typed tool %s has no handler", t.Name))
	}
	if len(t.Schema) == 0 {
		s, err := SchemaFor[In]()
		if err != nil {
			panic(fmt.Sprintf("toolkit: typed tool %s: %v", t.Name, err))
		}
		t.Schema = s
	}
	t.Handler = func(ctx context.Context, c *Call) (Result, error) {
		in, err := Decode[In](c.Args)
		if err != nil {
			return Result{}, err
		}
		out, err := fn(context.WithValue(ctx, callKey{}, c), in)
		if err != nil {
			return Result{}, err
		}
		return typedResult(out)
	}
	return t
}

// SchemaFor returns the JSON Schema Typed generates for In: an object schema
// (2020-12, no $schema), or an error naming what cannot be described.
func SchemaFor[In any]() (json.RawMessage, error) {
	rt := reflect.TypeFor[In]()
	if k := rt.Kind(); k != reflect.Struct && (k != reflect.Map || rt.Key().Kind() != reflect.String) {
		return nil, fmt.Errorf("arguments type %s is not a struct or a map with string keys", rt)
	}
	s, err := typedSchema(rt)
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", rt, err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", rt, err)
	}
	return b, nil
}

// Decode decodes a call's canonical arguments into In, the way a typed
// tool's handler gets them; useful in a typed tool's Paths or ReadOnlyFunc.
func Decode[In any](a Args) (In, error) {
	var in In
	if err := json.Unmarshal(a.canonicalOrEmpty(), &in); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			return in, fmt.Errorf("arguments: field %q does not fit %s", te.Field, te.Type)
		}
		return in, fmt.Errorf("arguments do not decode into %T: %v", in, err)
	}
	return in, nil
}

func typedResult(out any) (Result, error) {
	switch v := out.(type) {
	case string:
		return Result{Content: v}, nil
	case Result:
		return v, nil
	case json.RawMessage:
		return Result{Content: string(v)}, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return Result{}, fmt.Errorf("encoding the result: %w", err)
	}
	return Result{Content: string(b)}, nil
}

type callKey struct{}

// CallFromContext returns the call a typed tool's handler runs for, or nil
// outside one: its session and call id, Emit to stream progress as
// tool_call_text events, Ask to put a question to the human.
func CallFromContext(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

// Progress streams text as a tool_call_text event of the call a typed
// tool's handler runs for; outside one it does nothing.
func Progress(ctx context.Context, text string) {
	if c := CallFromContext(ctx); c != nil && c.Emit != nil {
		c.Emit(text)
	}
}
