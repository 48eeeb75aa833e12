package toolkit

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestECMAPatterns(t *testing.T) {
	tests := []struct {
		name    string
		schema  string
		args    string
		wantErr string // "" when valid
	}{
		{name: "lookahead accepts", schema: `{"properties":{"n":{"type":"string","pattern":"^(?!tmp_)[a-z_]+$"}}}`, args: `{"n":"data_set"}`},
		{name: "lookahead refuses", schema: `{"properties":{"n":{"type":"string","pattern":"^(?!tmp_)[a-z_]+$"}}}`, args: `{"n":"tmp_x"}`,
			wantErr: "field \"n\": must match pattern `^(?!tmp_)[a-z_]+$`, got \"tmp_x\""},
		{name: "draft-07 lookbehind", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"p":{"pattern":"(?<!\\.)json$"}}}`, args: `{"p":"a.json"}`,
			wantErr: "must match pattern"},
		{name: "backreference", schema: `{"properties":{"p":{"pattern":"^(\\w)\\1$"}}}`, args: `{"p":"aa"}`},
		{name: "control escape", schema: `{"properties":{"p":{"pattern":"^\\cJ$"}}}`, args: `{"p":"\n"}`},
		{name: "patternProperties lookahead", schema: `{"patternProperties":{"^(?!x-)":{"type":"integer"}}}`, args: `{"a":"s","x-b":"s"}`,
			wantErr: `field "a": want integer, got string`},
		{name: "format regex accepts ECMA-262", schema: `{"properties":{"r":{"type":"string","format":"regex"}}}`, args: `{"r":"^(?<=a)b\\cA"}`},
		{name: "format regex refuses", schema: `{"properties":{"r":{"type":"string","format":"regex"}}}`, args: `{"r":"(unclosed"}`,
			wantErr: `field "r": must be a valid regex`},
		{name: "format regex refuses inline flags", schema: `{"properties":{"r":{"type":"string","format":"regex"}}}`, args: `{"r":"(?i)abc"}`,
			wantErr: `field "r": must be a valid regex`},
		{name: "format regex refuses a comment group", schema: `{"properties":{"r":{"type":"string","format":"regex"}}}`, args: `{"r":"(?#c)a"}`,
			wantErr: `field "r": must be a valid regex`},
		{name: "format regex refuses a .NET escape", schema: `{"properties":{"r":{"type":"string","format":"regex"}}}`, args: `{"r":"\\a"}`,
			wantErr: `field "r": must be a valid regex`},
		{name: "format regex takes a modifier group", schema: `{"properties":{"r":{"type":"string","format":"regex"}}}`, args: `{"r":"(?i:a)b[\\-\\]]\\u{1F600}\\p{L}\\k<n>(?<n>x)"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, NewSchemaCache(), tc.schema)
			err := s.Validate(mustParse(t, tc.args).Value)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestPatternNotECMA(t *testing.T) {
	_, err := NewSchemaCache().Compile([]byte(`{"properties":{"p":{"pattern":"(?<"}}}`))
	if err == nil {
		t.Fatal("Compile accepted a pattern that is not a regular expression")
	}
}

// TestCatastrophicPatternEnds checks that a pattern that backtracks
// exponentially ends at the match bound with a refusal naming the reason,
// instead of hanging the call.
func TestCatastrophicPatternEnds(t *testing.T) {
	c := NewSchemaCache(WithRegexTimeout(20 * time.Millisecond))
	s := mustCompile(t, c, `{"properties":{"p":{"type":"string","pattern":"^(a+)+$"}}}`)
	long := strings.Repeat("a", 5000) + "!"
	err := s.Validate(map[string]any{"p": long})
	if err == nil {
		t.Fatal("Validate accepted the value")
	}
	if !strings.Contains(err.Error(), "matching took longer than 20ms") {
		t.Errorf("Validate = %v, want the timeout named", err)
	}
	if strings.Contains(err.Error(), long[:200]) {
		t.Error("the message carries the whole value")
	}
}

func TestFormatPolicy(t *testing.T) {
	tests := []struct {
		name   string
		policy FormatPolicy
		schema string
		value  string
		valid  bool
	}{
		{"assert email 2020-12", FormatAssert, `{"format":"email"}`, `"nope"`, false},
		{"assert email draft-07", FormatAssert, `{"$schema":"http://json-schema.org/draft-07/schema#","format":"email"}`, `"nope"`, false},
		{"assert email ok", FormatAssert, `{"format":"email"}`, `"a.b+c@example.com"`, true},
		{"annotate email 2020-12", FormatAnnotate, `{"format":"email"}`, `"nope"`, true},
		{"annotate email draft-07", FormatAnnotate, `{"$schema":"http://json-schema.org/draft-07/schema#","format":"email"}`, `"nope"`, true},
		{"annotate regex draft-07", FormatAnnotate, `{"$schema":"http://json-schema.org/draft-07/schema#","format":"regex"}`, `"(("`, true},
		{"semver is an annotation", FormatAssert, `{"format":"semver"}`, `"x"`, true},
		{"unknown format", FormatAssert, `{"format":"x-internal-id"}`, `"x"`, true},
		{"idn-email is asserted", FormatAssert, `{"format":"idn-email"}`, `"x"`, false},
		{"annotate idn-hostname", FormatAnnotate, `{"format":"idn-hostname"}`, `"example."`, true},
		{"date-time", FormatAssert, `{"format":"date-time"}`, `"2026-12-01T10:00:00Z"`, true},
		{"date-time bad", FormatAssert, `{"format":"date-time"}`, `"2026-13-01T10:00:00Z"`, false},
		{"uuid", FormatAssert, `{"format":"uuid"}`, `"2eb8aa08-aa98-11ea-b4aa-73b441d16380"`, true},
		{"ipv6", FormatAssert, `{"format":"ipv6"}`, `"::1"`, true},
		{"uri-template level 4", FormatAssert, `{"format":"uri-template"}`, `"http://example.com/search{?q,lang}{&page:3}/{+path*}"`, true},
		{"uri-template fragment and dots", FormatAssert, `{"format":"uri-template"}`, `"{/list*}{#x.y}{;a,b}{.dom*}"`, true},
		{"uri-template relative", FormatAssert, `{"format":"uri-template"}`, `"/users/{id}"`, true},
		{"uri-template pct", FormatAssert, `{"format":"uri-template"}`, `"/a%20b/{v%41r}"`, true},
		{"uri-template unclosed", FormatAssert, `{"format":"uri-template"}`, `"http://example.com/dictionary/{term:1}/{term"`, false},
		{"uri-template bad prefix", FormatAssert, `{"format":"uri-template"}`, `"{x:0}"`, false},
		{"uri-template space", FormatAssert, `{"format":"uri-template"}`, `"/a b"`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, NewSchemaCache(WithFormatPolicy(tc.policy)), tc.schema)
			err := s.validate(decodeNumbers(t, []byte(tc.value)))
			if got := err == nil; got != tc.valid {
				t.Errorf("valid = %v, want %v (%v)", got, tc.valid, err)
			}
		})
	}
	if err := FormatPolicy("sometimes").Validate(); err == nil {
		t.Error("Validate accepted an unknown policy")
	}
}

// slowKey is a string that `(a+)+b|x` matches (it holds an x) only after
// backtracking exponentially: every match of it runs past any bound.
var slowKey = strings.Repeat("a", 40) + "x"

// TestTimedOutMatchRefuses checks that a match past its bound refuses the
// arguments in every keyword that matches, whatever the keyword would have
// made of a "no match": the pattern matches slowKey, so each schema below
// refuses it, and a match that gives up must not let it through.
func TestTimedOutMatchRefuses(t *testing.T) {
	const evil = `(a+)+b|x`
	tests := []struct {
		name   string
		schema string
		args   map[string]any
	}{
		{name: "pattern", schema: `{"properties":{"p":{"type":"string","pattern":"` + evil + `"}}}`,
			args: map[string]any{"p": strings.Repeat("a", 40) + "!"}},
		{name: "not pattern", schema: `{"properties":{"p":{"type":"string","not":{"pattern":"` + evil + `"}}}}`,
			args: map[string]any{"p": slowKey}},
		{name: "if pattern then", schema: `{"properties":{"p":{"if":{"pattern":"` + evil + `"},"then":{"const":"never"}}}}`,
			args: map[string]any{"p": slowKey}},
		{name: "patternProperties", schema: `{"type":"object","patternProperties":{"` + evil + `":{"type":"integer"}}}`,
			args: map[string]any{slowKey: "a string where an integer is required"}},
		{name: "propertyNames pattern", schema: `{"type":"object","propertyNames":{"pattern":"^(a+)+$"}}`,
			args: map[string]any{strings.Repeat("a", 40) + "!": "v"}},
		{name: "propertyNames not pattern", schema: `{"type":"object","propertyNames":{"not":{"pattern":"` + evil + `"}}}`,
			args: map[string]any{slowKey: "v"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, NewSchemaCache(WithRegexTimeout(20*time.Millisecond)), tc.schema)
			err := s.Validate(tc.args)
			if err == nil {
				t.Fatal("Validate accepted the arguments although a match ran past its bound")
			}
			if !strings.Contains(err.Error(), "matching took longer than 20ms") {
				t.Errorf("Validate = %v, want the bound named", err)
			}
			for _, v := range tc.args {
				if s := v.(string); len(s) > 40 && strings.Contains(err.Error(), s) {
					t.Error("the message carries the whole value")
				}
			}
		})
	}
}

// timedOutFields counts the fields a refusal says could not be checked in
// time: one per match that ran past its bound.
func timedOutFields(err error) int {
	var ve *ValidationError
	if !errors.As(err, &ve) {
		return 0
	}
	n := 0
	for _, f := range ve.Fields {
		if strings.Contains(f.Message, "matching took longer than") {
			n++
		}
	}
	return n
}

// TestRegexBudgetStopsACall: 400 distinct items, each of whose match runs past its
// bound, cost the call at most its budget: once the budget is spent no item
// is matched any more and the call is refused saying why. The work done is
// counted (matches that ran past their bound: each took at least the
// bound), not timed.
func TestRegexBudgetStopsACall(t *testing.T) {
	const bound, budget = 10 * time.Millisecond, time.Second
	c := NewSchemaCache(WithRegexTimeout(bound), WithMatchBudgets(budget, 0))
	s := mustCompile(t, c, `{"type":"object","properties":{"items":{"type":"array","items":{"type":"string","pattern":"^(a+)+$"}}}}`)
	items := make([]any, 400)
	for i := range items {
		items[i] = strings.Repeat("a", 40) + "!" + strconv.Itoa(i)
	}
	err := s.Validate(map[string]any{"items": items})
	if err == nil {
		t.Fatal("Validate accepted the items")
	}
	if n, most := timedOutFields(err), int(budget/bound)+1; n > most {
		t.Fatalf("%d matches ran past their bound, want at most %d: the call's budget (%s) must stop matching", n, most, budget)
	}
	if !strings.Contains(err.Error(), "budget") {
		t.Errorf("Validate = %.300s…, want the spent budget named", err)
	}
}
