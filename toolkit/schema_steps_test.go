package toolkit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// stepsGuard is how long a test waits for a Check before it reports a
// hang: a guard against waiting for ever, not a measure of speed (the
// bound under test is the count of evaluations). Validating 20 000
// objects takes 2 s here, 14 s under -race, and went past 20 s on a
// loaded two-core machine.
const stepsGuard = 2 * time.Minute

// checkWithin runs Check and reports a hang after stepsGuard.
func checkWithin(t *testing.T, s *Schema, args string) error {
	t.Helper()
	v := mustParse(t, args).Value
	done := make(chan error, 1)
	go func() { done <- s.Check(context.Background(), v, nil) }()
	select {
	case err := <-done:
		return err
	case <-time.After(stepsGuard):
		t.Fatalf("Check still running after %v: the schema's branches are evaluated without bound", stepsGuard)
		return nil
	}
}

// doublingChain is a schema of n definitions, each applying the next one
// twice to the same value: 2^n evaluations of any arguments.
func doublingChain(n int) string {
	return `{"type":"object","allOf":[{"$ref":"#/$defs/d0"}],` + chainDefs(n) + `}`
}

// chainDefs is the "$defs" member of doublingChain.
func chainDefs(n int) string {
	var sb strings.Builder
	sb.WriteString(`"$defs":{`)
	for i := range n {
		fmt.Fprintf(&sb, `"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&sb, `"d%d":{"type":"object"}}`, n)
	return sb.String()
}

// A schema from an MCP server and arguments from the model must not hold a
// session: schemas whose alternatives recurse into the same value make the
// evaluations grow as 2^depth (the model picks the depth, up to the
// argument limit's 64), and a chain of definitions that each apply the
// next twice does so for any arguments. The check is refused once it
// would take more than maxSchemaSteps evaluations, before any is made.
func TestExponentialSchemaIsRefused(t *testing.T) {
	nest := func(d int) string { return `{"t":` + strings.Repeat("[", d) + strings.Repeat("]", d) + `}` }
	tests := []struct{ name, schema, args string }{
		{"oneOf recursing into the same array", `{"$defs":{"n":{"oneOf":[{"type":"array","items":{"$ref":"#/$defs/n"}},{"type":"array","items":{"$ref":"#/$defs/n"},"minItems":1}]}},"type":"object","properties":{"t":{"$ref":"#/$defs/n"}}}`, nest(40)},
		{"anyOf whose first branch fails late", `{"$defs":{"n":{"anyOf":[{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":0},{"type":"array","items":{"$ref":"#/$defs/n"}}]}},"type":"object","properties":{"t":{"$ref":"#/$defs/n"}}}`, nest(40)},
		{"the same under not, where failures are not reported", `{"$defs":{"n":{"minItems":1,"anyOf":[{"items":{"$ref":"#/$defs/n"}},{"items":{"$ref":"#/$defs/n"}}]}},"type":"object","properties":{"t":{"not":{"not":{"$ref":"#/$defs/n"}}}}}`, nest(40)},
		{"draft-07 items and $ref", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"n":{"allOf":[{"type":"array","items":{"$ref":"#/definitions/n"}},{"items":{"$ref":"#/definitions/n"}}]}},"type":"object","properties":{"t":{"$ref":"#/definitions/n"}}}`, nest(40)},
		{"a chain of definitions applied twice each, any arguments", doublingChain(60), `{}`},
		{"behind a $dynamicRef to a definition no keyword names", `{"type":"object","properties":{"t":{"$ref":"http://x.test/list"}},"$defs":{"n":{"$dynamicAnchor":"node","oneOf":[{"type":"array","items":{"$dynamicRef":"#node"}},{"type":"array","items":{"$dynamicRef":"#node"},"minItems":1}]},"list":{"$id":"http://x.test/list","$dynamicAnchor":"node","type":"array","items":{"$dynamicRef":"#node"}}}}`, nest(40)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, NewSchemaCache(), tc.schema)
			err := checkWithin(t, s, tc.args)
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, ErrSchemaSteps) || !strings.Contains(err.Error(), "more than") || !strings.Contains(err.Error(), "schema") {
				t.Fatalf("Check = %v, want invalid arguments saying the schema would take too many steps", err)
			}
		})
	}
}

// What the bound must not refuse: a recursive "any JSON value" schema with
// arguments nested to the argument limit, the same chain short, and a big
// flat array of objects.
func TestLinearSchemasAreNotRefused(t *testing.T) {
	anyJSON := `{"$defs":{"j":{"anyOf":[{"type":"null"},{"type":"boolean"},{"type":"number"},{"type":"string"},{"type":"array","items":{"$ref":"#/$defs/j"}},{"type":"object","additionalProperties":{"$ref":"#/$defs/j"}}]}},"type":"object","properties":{"v":{"$ref":"#/$defs/j"}},"required":["v"]}`
	deep := `{"v":` + strings.Repeat(`[{"k":`, 31) + `[1,"s",null,true]` + strings.Repeat(`}]`, 31) + `}`
	var items strings.Builder
	items.WriteString(`{"v":[`)
	for i := range 20000 {
		if i > 0 {
			items.WriteByte(',')
		}
		fmt.Fprintf(&items, `{"id":%d,"tags":["a","b"],"note":null}`, i)
	}
	items.WriteString(`]}`)
	tests := []struct{ name, schema, args string }{
		{"any JSON value, 63 levels", anyJSON, deep},
		{"any JSON value, 20000 objects", anyJSON, items.String()},
		{"a chain of 12 definitions applied twice each", doublingChain(12), `{}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, NewSchemaCache(), tc.schema)
			if err := checkWithin(t, s, tc.args); err != nil {
				t.Fatalf("Check = %v, want the arguments accepted", err)
			}
		})
	}
}

// Calls under the bound one by one cannot add up to hours in a turn: the
// turn's budget of evaluations is shared, as its matching budget is. The
// schema's first alternative accepts at once, so each call is cheap to
// validate while its bound counts the second (2^19 evaluations).
func TestTurnSchemaStepsShared(t *testing.T) {
	c := NewSchemaCache()
	schema := `{"anyOf":[true,{"$ref":"#/$defs/d0"}],` + chainDefs(18) + `}`
	s := mustCompile(t, c, schema)
	args := mustParse(t, `{}`).Value
	per := (&stepCounter{g: s.first.steps, memo: map[stepKey]int64{}}).count(s.first.sch, args)
	if per < 1<<19 || per > maxSchemaSteps {
		t.Fatalf("one call counts %d evaluations, want 2^19 to %d", per, maxSchemaSteps)
	}
	turn := c.NewTurnBudget()
	calls := int(maxTurnSchemaSteps / per)
	for i := range calls {
		if err := s.Check(context.Background(), args, turn); err != nil {
			t.Fatalf("call %d: Check = %v, want accepted within the turn's budget", i+1, err)
		}
	}
	err := s.Check(context.Background(), args, turn)
	if !errors.Is(err, ErrSchemaSteps) || !strings.Contains(err.Error(), "calls of this turn") {
		t.Fatalf("call %d: Check = %v, want refused: the turn's evaluations are spent", calls+1, err)
	}
	// Another turn starts afresh; without a turn only the call's bound holds.
	if err := s.Check(context.Background(), args, c.NewTurnBudget()); err != nil {
		t.Fatalf("a new turn: Check = %v", err)
	}
	if err := s.Check(context.Background(), args, nil); err != nil {
		t.Fatalf("no turn: Check = %v", err)
	}
}
