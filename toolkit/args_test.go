package toolkit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf16"

	"github.com/google/go-cmp/cmp"
)

// canonicalCases are valid arguments and their canonical forms.
var canonicalCases = []struct {
	name string
	raw  string
	want string
}{
	{name: "empty string", raw: "", want: `{}`},
	{name: "only whitespace", raw: " \t\r\n ", want: `{}`},
	{name: "empty object", raw: `{}`, want: `{}`},
	{name: "surrounding whitespace", raw: "\n  { \"a\" : [ 1 , 2 ] , \"b\" : { } }\t\r\n", want: `{"a":[1,2],"b":{}}`},
	{name: "keys sorted", raw: `{"b":1,"a":2,"c":3}`, want: `{"a":2,"b":1,"c":3}`},
	{name: "nested keys sorted", raw: `{"z":{"y":[{"b":1,"a":2}],"x":null},"a":true}`, want: `{"a":true,"z":{"x":null,"y":[{"a":2,"b":1}]}}`},
	{name: "already sorted", raw: `{"a":1,"b":{"c":"d"}}`, want: `{"a":1,"b":{"c":"d"}}`},
	{name: "prefix key first", raw: `{"ab":1,"a":2}`, want: `{"a":2,"ab":1}`},
	{
		// RFC 8785 section 3.2.3.
		name: "keys by UTF-16 code units",
		raw:  `{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
		want: "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
	},
	{name: "supplementary before U+E000 block", raw: "{\"\ufb01\":1,\"\U0001F600\":2,\"\ue000\":3}", want: "{\"\U0001F600\":2,\"\ue000\":3,\"\ufb01\":1}"},
	{
		// RFC 8785 section 3.2.2.
		name: "RFC 8785 example",
		raw:  `{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
		want: `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
	},
	{name: "short escapes", raw: `{"s":"\b\f\n\r\t"}`, want: `{"s":"\b\f\n\r\t"}`},
	{name: "other controls lowercase hex", raw: `{"s":"\u0000\u001F\u000b"}`, want: `{"s":"\u0000\u001f\u000b"}`},
	{name: "needless escapes dropped", raw: `{"s":"\u0041\/\u00e9\u2028\u007f"}`, want: "{\"s\":\"A/\u00e9\u2028\u007f\"}"},
	{name: "raw UTF-8 kept", raw: "{\"s\":\"h\u00e9llo \U0001F600\"}", want: "{\"s\":\"h\u00e9llo \U0001F600\"}"},
	{name: "escaped key", raw: `{"\u0062":1,"a\"b":2}`, want: `{"a\"b":2,"b":1}`},
	{name: "surrogate pair", raw: `{"s":"\uD83D\uDE00"}`, want: "{\"s\":\"\U0001F600\"}"},
	{name: "1.0 is 1", raw: `{"n":1.0}`, want: `{"n":1}`},
	{name: "1e2 is 100", raw: `{"n":1e2}`, want: `{"n":100}`},
	{name: "1.5e-7", raw: `{"n":1.5e-7}`, want: `{"n":1.5e-7}`},
	{name: "0.000001 stays decimal", raw: `{"n":0.000001}`, want: `{"n":0.000001}`},
	{name: "1e-7 exponent", raw: `{"n":0.0000001}`, want: `{"n":1e-7}`},
	{name: "1e20 decimal", raw: `{"n":1E20}`, want: `{"n":100000000000000000000}`},
	{name: "1e21 exponent", raw: `{"n":1e21}`, want: `{"n":1e+21}`},
	{name: "not int64", raw: `{"n":12345678901234567890}`, want: `{"n":12345678901234567000}`},
	{name: "int64 max exact", raw: `{"n":9223372036854775807}`, want: `{"n":9223372036854775807}`},
	{name: "int64 min exact", raw: `{"n":-9223372036854775808}`, want: `{"n":-9223372036854775808}`},
	{name: "above int64 max", raw: `{"n":9223372036854775808}`, want: `{"n":9223372036854776000}`},
	{name: "beyond 2^53 kept exact", raw: `{"n":9007199254740993}`, want: `{"n":9007199254740993}`},
	{name: "minus zero", raw: `{"n":-0}`, want: `{"n":0}`},
	{name: "minus zero float", raw: `{"n":-0.0e5}`, want: `{"n":0}`},
	{name: "negative fraction", raw: `{"n":-12.50}`, want: `{"n":-12.5}`},
	{name: "exponent plus", raw: `{"n":25E+1}`, want: `{"n":250}`},
	{name: "underflow to zero", raw: `{"n":1e-400}`, want: `{"n":0}`},
	{name: "smallest denormal", raw: `{"n":5e-324}`, want: `{"n":5e-324}`},
	{name: "largest float", raw: `{"n":1.7976931348623157e308}`, want: `{"n":1.7976931348623157e+308}`},
	{name: "literals", raw: `{"t":true,"f":false,"n":null}`, want: `{"f":false,"n":null,"t":true}`},
	{name: "empty containers", raw: `{"o":{},"a":[],"s":""}`, want: `{"a":[],"o":{},"s":""}`},
	{name: "same key in sibling objects", raw: `{"a":{"k":1},"b":{"k":2,"K2":3}}`, want: `{"a":{"k":1},"b":{"K2":3,"k":2}}`},
	{name: "depth 64 allowed", raw: `{"a":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`, want: `{"a":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`},
	{name: "many keys", raw: manyKeys(100, ""), want: sortedManyKeys(100)},
}

// manyKeys builds an object with keys k0..k(n-1) in reverse order, then
// extra members.
func manyKeys(n int, extra string) string {
	var sb strings.Builder
	sb.WriteByte('{')
	for i := n - 1; i >= 0; i-- {
		if i != n-1 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"k%d":%d`, i, i)
	}
	sb.WriteString(extra)
	sb.WriteByte('}')
	return sb.String()
}

func sortedManyKeys(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	slices.Sort(keys)
	var sb strings.Builder
	sb.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"%s":%s`, k, k[1:])
	}
	sb.WriteByte('}')
	return sb.String()
}

// valueDiff is cmp.Diff(want, got) computed only when the values are not
// deeply equal: cmp's slice diffing is exponential in the nesting of
// one-element arrays.
func valueDiff(want, got any) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	return cmp.Diff(want, got)
}

// decodeCanonical decodes canonical bytes the way encoding/json would, with
// json.Number numbers.
func decodeCanonical(t *testing.T, b []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode canonical %s: %v", b, err)
	}
	return v
}

func TestParseArgsCanonical(t *testing.T) {
	for _, tc := range canonicalCases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseArgs(tc.raw, Limits{})
			if err != nil {
				t.Fatalf("ParseArgs: %v", err)
			}
			if diff := cmp.Diff(tc.want, string(a.Canonical)); diff != "" {
				t.Errorf("canonical (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseArgsValueIsDecodedCanonical(t *testing.T) {
	for _, tc := range canonicalCases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseArgs(tc.raw, Limits{})
			if err != nil {
				t.Fatalf("ParseArgs: %v", err)
			}
			if diff := valueDiff(decodeCanonical(t, a.Canonical), a.Value); diff != "" {
				t.Errorf("Value differs from decoded Canonical (-decoded +Value):\n%s", diff)
			}
			again, err := ParseArgs(string(a.Canonical), Limits{})
			if err != nil {
				t.Fatalf("ParseArgs(canonical): %v", err)
			}
			if diff := cmp.Diff(string(a.Canonical), string(again.Canonical)); diff != "" {
				t.Errorf("canonical form is not idempotent (-first +second):\n%s", diff)
			}
			if diff := valueDiff(a.Value, again.Value); diff != "" {
				t.Errorf("Value of canonical differs (-first +second):\n%s", diff)
			}
		})
	}
}

func TestParseArgsNumbersAreJSONNumbers(t *testing.T) {
	a, err := ParseArgs(`{"i":42,"f":1.50,"big":1e300,"neg":-7}`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"i":   json.Number("42"),
		"f":   json.Number("1.5"),
		"big": json.Number("1e+300"),
		"neg": json.Number("-7"),
	}
	if diff := cmp.Diff(want, a.Value); diff != "" {
		t.Errorf("Value (-want +got):\n%s", diff)
	}
	if got := a.Int("i", 0); got != 42 {
		t.Errorf("Int(i) = %d, want 42", got)
	}
}

func TestParseArgsRejects(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		lim  Limits
		want *ArgsError
	}{
		{
			name: "duplicate key",
			raw:  `{"path":"a","path":"b"}`,
			want: &ArgsError{Msg: `arguments: duplicate key "path" at byte 12`, Offset: 12},
		},
		{
			name: "duplicate key in nested object",
			raw:  `{"o":{"x":1,"y":2,"x":3}}`,
			want: &ArgsError{Msg: `arguments: duplicate key "x" at byte 18`, Offset: 18},
		},
		{
			name: "duplicate key spelled with an escape",
			raw:  `{"ab":1,"a\u0062":2}`,
			want: &ArgsError{Msg: `arguments: duplicate key "ab" at byte 8`, Offset: 8},
		},
		{
			name: "keys differ only by case",
			raw:  `{"Path":1,"path":2}`,
			want: &ArgsError{Msg: `arguments: keys "Path" and "path" differ only by case at byte 10`, Offset: 10},
		},
		{
			name: "Kelvin sign folds to k",
			raw:  `{"k":1,"\u212a":2}`,
			want: &ArgsError{Msg: "arguments: keys \"k\" and \"\u212a\" differ only by case at byte 7", Offset: 7},
		},
		{
			name: "sharp s folds to capital sharp s",
			raw:  "{\"stra\u00dfe\":1,\"STRA\u1e9eE\":2}",
			want: &ArgsError{Msg: "arguments: keys \"stra\u00dfe\" and \"STRA\u1e9eE\" differ only by case at byte 13", Offset: 13},
		},
		{
			name: "duplicate in a large object",
			raw:  manyKeys(40, `,"k3":0`),
			want: &ArgsError{Msg: `arguments: duplicate key "k3" at byte 341`, Offset: 341},
		},
		{
			name: "case clash in a large object",
			raw:  manyKeys(40, `,"K17":0`),
			want: &ArgsError{Msg: `arguments: keys "k17" and "K17" differ only by case at byte 341`, Offset: 341},
		},
		{
			name: "duplicate in a large nested object",
			raw:  `{"o":` + manyKeys(40, `,"k39":0`) + `,"k0":1}`,
			want: &ArgsError{Msg: `arguments: duplicate key "k39" at byte 346`, Offset: 346},
		},
		{
			name: "array",
			raw:  ` [1,2]`,
			want: &ArgsError{Msg: `arguments must be a JSON object, got array`, Offset: 1},
		},
		{
			name: "string",
			raw:  `"path"`,
			want: &ArgsError{Msg: `arguments must be a JSON object, got string`, Offset: 0},
		},
		{
			name: "string holding an object",
			raw:  `"{\"a\":1}"`,
			want: &ArgsError{Msg: `arguments must be a JSON object, got string (a JSON-encoded object): send the object itself, not a string holding it`, Offset: 0},
		},
		{
			name: "number",
			raw:  `-1.5`,
			want: &ArgsError{Msg: `arguments must be a JSON object, got number`, Offset: 0},
		},
		{
			name: "boolean",
			raw:  `true`,
			want: &ArgsError{Msg: `arguments must be a JSON object, got boolean`, Offset: 0},
		},
		{
			name: "null",
			raw:  `null`,
			want: &ArgsError{Msg: `arguments must be a JSON object, got null`, Offset: 0},
		},
		{
			name: "not JSON",
			raw:  `hello`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 0: want a JSON object starting with '{', got 'h'`, Offset: 0},
		},
		{
			name: "cut off",
			raw:  `{"a":1`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 6: the text ends early, want ',' or '}' after the value`, Offset: 6},
		},
		{
			name: "trailing comma in object",
			raw:  `{"a":1,}`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 7: trailing comma before '}'`, Offset: 7},
		},
		{
			name: "trailing comma in array",
			raw:  `{"a":[1,]}`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 8: trailing comma before ']'`, Offset: 8},
		},
		{
			name: "unquoted key",
			raw:  `{a:1}`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 1: want a double-quoted key, got 'a'`, Offset: 1},
		},
		{
			name: "missing colon",
			raw:  `{"a" 1}`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 5: want ':' after the key, got '1'`, Offset: 5},
		},
		{
			name: "bad literal",
			raw:  `{"a":tru}`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 5: want a value (true, false, null, a number, a string, an object or an array), got 't'`, Offset: 5},
		},
		{
			name: "single quotes",
			raw:  `{"a":'x'}`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 5: want a value, got '''`, Offset: 5},
		},
		{
			name: "leading zero",
			raw:  `{"a":01}`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 6: want ',' or '}' after the value, got '1'`, Offset: 6},
		},
		{
			name: "fraction without digits",
			raw:  `{"a":1.}`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 7: want a digit, got '}'`, Offset: 7},
		},
		{
			name: "exponent without digits",
			raw:  `{"a":1e+}`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 8: want a digit, got '}'`, Offset: 8},
		},
		{
			name: "lone minus",
			raw:  `{"a":-}`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 6: want a digit, got '}'`, Offset: 6},
		},
		{
			name: "NaN",
			raw:  `{"a":NaN}`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 5: want a value, got 'N'`, Offset: 5},
		},
		{
			name: "number out of range",
			raw:  `{"a":1e400}`,
			want: &ArgsError{Msg: `arguments: number 1e400 at byte 5 is out of range`, Offset: 5},
		},
		{
			name: "bad escape",
			raw:  `{"a":"x\qy"}`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 7: invalid escape '\q' in string`, Offset: 7},
		},
		{
			name: "short unicode escape",
			raw:  `{"a":"\u12"}`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 6: invalid \u escape: want four hex digits`, Offset: 6},
		},
		{
			name: "raw newline in string",
			raw:  "{\"a\":\"x\ny\"}",
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 7: control character 0x0a in string; escape it (\n, \t, \u00XX)`, Offset: 7},
		},
		{
			name: "raw control after an escape",
			raw:  "{\"a\":\"\\n\x01\"}",
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 8: control character 0x01 in string; escape it (\n, \t, \u00XX)`, Offset: 8},
		},
		{
			name: "unterminated string",
			raw:  `{"a":"abc`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 9: unterminated string starting at byte 5`, Offset: 9},
		},
		{
			name: "second object",
			raw:  `{"a":1}{"b":2}`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 7: unexpected '{' after the arguments object; send exactly one object`, Offset: 7},
		},
		{
			name: "trailing text",
			raw:  `{"a":1} x`,
			want: &ArgsError{Msg: `arguments: invalid JSON at byte 8: unexpected 'x' after the arguments object; send exactly one object`, Offset: 8},
		},
		{
			name: "invalid UTF-8 in value",
			raw:  "{\"a\":\"\xff\"}",
			want: &ArgsError{Msg: `arguments: invalid UTF-8 at byte 6`, Offset: 6},
		},
		{
			name: "invalid UTF-8 in key",
			raw:  "{\"a\xc3\":1}",
			want: &ArgsError{Msg: `arguments: invalid UTF-8 at byte 3`, Offset: 3},
		},
		{
			name: "overlong UTF-8",
			raw:  "{\"a\":\"\xc0\xaf\"}",
			want: &ArgsError{Msg: `arguments: invalid UTF-8 at byte 6`, Offset: 6},
		},
		{
			name: "UTF-8 encoded surrogate",
			raw:  "{\"a\":\"x\\n\xed\xa0\x80\"}",
			want: &ArgsError{Msg: `arguments: invalid UTF-8 at byte 9`, Offset: 9},
		},
		{
			name: "lone high surrogate",
			raw:  `{"a":"\ud800"}`,
			want: &ArgsError{Msg: `arguments: unpaired surrogate escape \ud800 at byte 6; a surrogate must be paired (\ud83d\ude00) or the character written as UTF-8`, Offset: 6},
		},
		{
			name: "lone low surrogate",
			raw:  `{"a":"x\uDC00"}`,
			want: &ArgsError{Msg: `arguments: unpaired surrogate escape \udc00 at byte 7; a surrogate must be paired (\ud83d\ude00) or the character written as UTF-8`, Offset: 7},
		},
		{
			name: "high surrogate then non-surrogate escape",
			raw:  `{"a":"\ud800\u0041"}`,
			want: &ArgsError{Msg: `arguments: unpaired surrogate escape \ud800 at byte 6; a surrogate must be paired (\ud83d\ude00) or the character written as UTF-8`, Offset: 6},
		},
		{
			name: "high surrogate at end of string",
			raw:  `{"\ud83d":1}`,
			want: &ArgsError{Msg: `arguments: unpaired surrogate escape \ud83d at byte 2; a surrogate must be paired (\ud83d\ude00) or the character written as UTF-8`, Offset: 2},
		},
		{
			name: "too deep",
			raw:  `{"a":{"b":{}}}`,
			lim:  Limits{MaxDepth: 2},
			want: &ArgsError{Msg: `arguments: nested deeper than 2 levels`, Offset: 10},
		},
		{
			name: "too deep by default",
			raw:  `{"a":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`,
			want: &ArgsError{Msg: `arguments: nested deeper than 64 levels`, Offset: 68},
		},
		{
			name: "too long",
			raw:  `{"a":"12345"}`,
			lim:  Limits{MaxBytes: 10},
			want: &ArgsError{Msg: `arguments: 13 bytes, limit 10`, Offset: -1},
		},
		{
			name: "too long by default",
			raw:  `{"a":"` + strings.Repeat("x", 2000000-8) + `"}`,
			want: &ArgsError{Msg: `arguments: 2000000 bytes, limit 1048576`, Offset: -1},
		},
		{
			name: "too many keys",
			raw:  `{"a":1,"b":{"c":3}}`,
			lim:  Limits{MaxKeys: 2},
			want: &ArgsError{Msg: `arguments: more than 2 keys`, Offset: 12},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseArgs(tc.raw, tc.lim)
			if err == nil {
				t.Fatalf("ParseArgs accepted it: %s", a.Canonical)
			}
			got, ok := err.(*ArgsError)
			if !ok {
				t.Fatalf("error %T %v, want *ArgsError", err, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if got.Error() != tc.want.Msg {
				t.Errorf("Error() = %q, want %q", got.Error(), tc.want.Msg)
			}
		})
	}
}

func TestParseArgsConcurrent(t *testing.T) {
	inputs := []string{
		`{"b":[1,2,{"d":"x","c":1.0}],"a":"\u00e9"}`,
		`{"a":1,"a":2}`,
		manyKeys(50, ""),
		`{"x":"\ud800"}`,
	}
	want := make([]string, len(inputs))
	for i, in := range inputs {
		a, err := ParseArgs(in, Limits{})
		want[i] = fmt.Sprint(string(a.Canonical), err)
	}
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 400 {
				k := (i + g) % len(inputs)
				a, err := ParseArgs(inputs[k], Limits{})
				if got := fmt.Sprint(string(a.Canonical), err); got != want[k] {
					t.Errorf("input %d: got %s, want %s", k, got, want[k])
					return
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}

func TestLimitsDefaults(t *testing.T) {
	if got := (Limits{}).withDefaults(); got != DefaultLimits {
		t.Errorf("zero Limits = %+v, want %+v", got, DefaultLimits)
	}
	if got := (Limits{MaxDepth: 3}).withDefaults(); got.MaxDepth != 3 || got.MaxBytes != DefaultLimits.MaxBytes || got.MaxKeys != DefaultLimits.MaxKeys {
		t.Errorf("Limits{MaxDepth: 3} = %+v", got)
	}
}

func TestCanonicalizeMatchesParseArgs(t *testing.T) {
	for _, tc := range canonicalCases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseArgs(tc.raw, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			var v any = map[string]any{}
			if strings.TrimSpace(tc.raw) != "" {
				dec := json.NewDecoder(strings.NewReader(tc.raw))
				dec.UseNumber()
				if err := dec.Decode(&v); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Canonicalize(v)
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if diff := cmp.Diff(string(a.Canonical), string(got)); diff != "" {
				t.Errorf("Canonicalize vs ParseArgs (-ParseArgs +Canonicalize):\n%s", diff)
			}
		})
	}
}

func TestCanonicalizeGoValues(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{name: "nil", v: nil, want: `null`},
		{name: "nil map", v: map[string]any(nil), want: `{}`},
		{name: "nil slice", v: []any(nil), want: `[]`},
		{name: "ints", v: []any{0, int8(-8), int16(16), int32(-32), int64(math.MinInt64), uint(7), uint8(8), uint16(16), uint32(32), uint64(math.MaxInt64)}, want: `[0,-8,16,-32,-9223372036854775808,7,8,16,32,9223372036854775807]`},
		{name: "uint64 beyond int64", v: uint64(12345678901234567890), want: `12345678901234567000`},
		{name: "floats", v: []any{1.0, math.Copysign(0, -1), 0.1, 1.5e-7, 1e21, 1e20, 123456789012345680000.0}, want: `[1,0,0.1,1.5e-7,1e+21,100000000000000000000,123456789012345680000]`},
		{name: "json.Number normalised", v: []any{json.Number("1.0"), json.Number("-0"), json.Number("1E2"), json.Number("12345678901234567890")}, want: `[1,0,100,12345678901234567000]`},
		{name: "strings", v: "tab\there \"q\" \\ \u0001 \u007f é", want: "\"tab\\there \\\"q\\\" \\\\ \\u0001 \u007f é\""},
		{
			name: "mixed object",
			v: map[string]any{
				"s": "x", "i": 42, "f": 2.5, "n": json.Number("7"), "b": false, "z": nil,
				"a": []any{map[string]any{"y": 1, "x": 2}},
			},
			want: `{"a":[{"x":2,"y":1}],"b":false,"f":2.5,"i":42,"n":7,"s":"x","z":null}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonicalize(tc.v)
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCanonicalizeRejects(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	tests := []struct {
		name string
		v    any
		want string
	}{
		{name: "NaN", v: math.NaN(), want: "arguments: number NaN is not valid JSON"},
		{name: "infinity", v: map[string]any{"x": math.Inf(1)}, want: "arguments: number +Inf is not valid JSON"},
		{name: "invalid UTF-8", v: "a\xffb", want: `arguments: invalid UTF-8 in string "a\xffb"`},
		{name: "invalid UTF-8 key", v: map[string]any{"\xff": 1}, want: `arguments: invalid UTF-8 in key "\xff"`},
		{name: "bad json.Number", v: json.Number("1."), want: `arguments: invalid number "1."`},
		{name: "json.Number with trailing text", v: json.Number("1 "), want: `arguments: invalid number "1 "`},
		{name: "json.Number out of range", v: json.Number("-1e999"), want: `arguments: number -1e999 is out of range`},
		{name: "unsupported type", v: struct{}{}, want: "arguments: unsupported value of type struct {}"},
		{name: "typed slice", v: []string{"a"}, want: "arguments: unsupported value of type []string"},
		{name: "cycle", v: cyclic, want: "arguments: nested deeper than 10000 levels"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonicalize(tc.v)
			if err == nil {
				t.Fatalf("Canonicalize accepted it: %s", got)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestArgsFromValue(t *testing.T) {
	tests := []struct {
		name      string
		v         map[string]any
		lim       Limits
		want      string
		wantValue map[string]any
		wantErr   string
	}{
		{name: "nil map", v: nil, want: `{}`, wantValue: map[string]any{}},
		{
			name:      "numbers become canonical json.Number",
			v:         map[string]any{"f": 1.0, "i": 3, "n": json.Number("2.50"), "list": []any{0.5, "x"}},
			want:      `{"f":1,"i":3,"list":[0.5,"x"],"n":2.5}`,
			wantValue: map[string]any{"f": json.Number("1"), "i": json.Number("3"), "n": json.Number("2.5"), "list": []any{json.Number("0.5"), "x"}},
		},
		{name: "case clash", v: map[string]any{"Path": "a", "path": "b"}, wantErr: `arguments: keys "Path" and "path" differ only by case at byte 12`},
		{name: "too deep", v: map[string]any{"a": map[string]any{"b": []any{}}}, lim: Limits{MaxDepth: 2}, wantErr: "arguments: nested deeper than 2 levels"},
		{name: "too long", v: map[string]any{"a": strings.Repeat("x", 20)}, lim: Limits{MaxBytes: 16}, wantErr: "arguments: canonical form longer than 16 bytes"},
		{name: "unsupported", v: map[string]any{"c": make(chan int)}, wantErr: "arguments: unsupported value of type chan int"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ArgsFromValue(tc.v, tc.lim)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("accepted: %s", a.Canonical)
				}
				if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(a.Canonical)); diff != "" {
				t.Errorf("canonical (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantValue, a.Value); diff != "" {
				t.Errorf("value (-want +got):\n%s", diff)
			}
		})
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestHashAndDedupKey(t *testing.T) {
	a1, err := ParseArgs(`{"path":"a.txt","limit":10,"opts":{"b":true,"a":1.0}}`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := ParseArgs("{ \"opts\" : {\"a\":1, \"b\":true}, \"limit\":1e1,\n \"path\":\"a.txt\" }", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	const canonical = `{"limit":10,"opts":{"a":1,"b":true},"path":"a.txt"}`
	if string(a1.Canonical) != canonical {
		t.Fatalf("canonical = %s, want %s", a1.Canonical, canonical)
	}
	tests := []struct {
		name string
		got  string
		want string
	}{
		{name: "hash", got: a1.Hash(), want: sha256Hex(canonical)},
		{name: "hash of the same arguments written differently", got: a2.Hash(), want: a1.Hash()},
		{name: "hash of {}", got: Args{}.Hash(), want: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
		{name: "empty string arguments hash like {}", got: mustParse(t, "").Hash(), want: Args{}.Hash()},
		{name: "dedup key", got: DedupKey("read_files", a1), want: sha256Hex("read_files|" + canonical)},
		{name: "dedup key of the same arguments written differently", got: DedupKey("read_files", a2), want: DedupKey("read_files", a1)},
		{name: "dedup key of zero Args", got: DedupKey("t", Args{}), want: sha256Hex("t|{}")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %s, want %s", tc.got, tc.want)
			}
		})
	}
	if DedupKey("read_files", a1) == DedupKey("find_files", a1) {
		t.Error("dedup keys of two tools are equal")
	}
}

func mustParse(t *testing.T, raw string) Args {
	t.Helper()
	a, err := ParseArgs(raw, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// compareUTF16Ref compares by UTF-16 code units the slow way.
func compareUTF16Ref(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

func TestCompareUTF16(t *testing.T) {
	alphabet := []rune{'a', 'b', 'A', 0x7f, 0x80, 0xff, 0x100, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xfb33, 0xffff, 0x10000, 0x1f600, 0x10ffff}
	rnd := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		n := rnd.IntN(4)
		r := make([]rune, n)
		for i := range r {
			r[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		return string(r)
	}
	for range 20000 {
		a, b := word(), word()
		if got, want := sign(compareUTF16(a, b)), sign(compareUTF16Ref(a, b)); got != want {
			t.Fatalf("compareUTF16(%q, %q) = %d, want %d", a, b, got, want)
		}
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func TestFoldHashAgreesWithEqualFold(t *testing.T) {
	pairs := [][2]string{
		{"path", "PATH"}, {"k", "\u212a"}, {"s", "\u017f"}, {"stra\u00dfe", "STRA\u1e9eE"},
		{"\u03a3", "\u03c2"}, {"\u01c5", "\u01c6"}, {"\u00e9t\u00e9", "\u00c9T\u00c9"},
	}
	for _, p := range pairs {
		if !strings.EqualFold(p[0], p[1]) {
			t.Fatalf("%q and %q are not EqualFold", p[0], p[1])
		}
		if foldHash(p[0]) != foldHash(p[1]) {
			t.Errorf("foldHash(%q) != foldHash(%q)", p[0], p[1])
		}
	}
	if foldHash("ab") == foldHash("ba") {
		t.Error("foldHash ignores order")
	}
}

// fuzzSchemas are schemas the fuzzer validates parsed arguments against: the
// fast path must never accept what the general validator refuses, and
// phrasing a refusal must not fail.
var fuzzSchemas = sync.OnceValue(func() []*Schema {
	c := NewSchemaCache()
	var out []*Schema
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":["string","null"]},"b":{"type":"array","items":{"type":"integer"},"maxItems":3}},"additionalProperties":{"type":["boolean","number","object"]}}`,
		`{"type":"object","properties":{"a":{"enum":["x","y",""]},"k":{"type":"object","required":["a"]}},"required":[]}`,
		`{"additionalProperties":{"type":"object","additionalProperties":{"type":"string","minLength":1,"maxLength":3}}}`,
		`{"properties":{"a":false},"additionalProperties":true}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"a":{"type":"array","minItems":1,"items":{"type":["array","string"]}}},"additionalProperties":{"type":"integer"}}`,
		`{"properties":{"n":{"minimum":0},"o":{"anyOf":[{"type":"string"},{"type":"object","required":["id"]}]}}}`,
	} {
		sch, err := c.Compile([]byte(s))
		if err != nil {
			panic(err)
		}
		out = append(out, sch)
	}
	return out
})

// FuzzParseArgs checks that ParseArgs never panics, agrees with encoding/json
// on what is JSON, and that its canonical form is a fixed point whose
// decoding is Value; then it validates the value against fuzzSchemas.
func FuzzParseArgs(f *testing.F) {
	for _, tc := range canonicalCases {
		f.Add(tc.raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		a, err := ParseArgs(raw, Limits{MaxDepth: 32})
		if err != nil {
			ae, ok := err.(*ArgsError)
			if !ok {
				t.Fatalf("error %T, want *ArgsError", err)
			}
			if strings.HasPrefix(ae.Msg, "arguments: invalid JSON") && json.Valid([]byte(raw)) {
				t.Fatalf("ParseArgs calls valid JSON invalid: %v", err)
			}
			if ae.Offset < -1 || ae.Offset > len(raw) {
				t.Fatalf("offset %d outside the text (%d bytes)", ae.Offset, len(raw))
			}
			return
		}
		if strings.TrimSpace(raw) != "" && !json.Valid([]byte(raw)) {
			t.Fatalf("ParseArgs accepted invalid JSON %q", raw)
		}
		if !json.Valid(a.Canonical) {
			t.Fatalf("canonical form is not JSON: %q", a.Canonical)
		}
		again, err := ParseArgs(string(a.Canonical), Limits{MaxDepth: 32, MaxBytes: math.MaxInt})
		if err != nil {
			t.Fatalf("ParseArgs(canonical %q): %v", a.Canonical, err)
		}
		if !bytes.Equal(a.Canonical, again.Canonical) {
			t.Fatalf("canonical form not idempotent:\n%q\n%q", a.Canonical, again.Canonical)
		}
		if diff := valueDiff(a.Value, again.Value); diff != "" {
			t.Fatalf("Value differs after re-parsing (-first +second):\n%s", diff)
		}
		if diff := valueDiff(decodeCanonical(t, a.Canonical), a.Value); diff != "" {
			t.Fatalf("Value differs from decoded canonical (-decoded +Value):\n%s", diff)
		}
		c, err := Canonicalize(a.Value)
		if err != nil {
			t.Fatalf("Canonicalize(Value): %v", err)
		}
		if !bytes.Equal(c, a.Canonical) {
			t.Fatalf("Canonicalize(Value) = %q, want %q", c, a.Canonical)
		}
		for i, s := range fuzzSchemas() {
			err := s.first.sch.Validate(a.Value)
			if s.fast != nil && s.fast.valid(a.Value) && err != nil {
				t.Fatalf("schema %d: the fast path accepts %s, the validator refuses it: %v", i, a.Canonical, err)
			}
			if err := s.Validate(a.Value); err != nil && !strings.HasPrefix(err.Error(), "invalid arguments: ") {
				t.Fatalf("schema %d: unphrased error %v", i, err)
			}
		}
	})
}
