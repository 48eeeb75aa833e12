package builtin

import (
	"strings"
	"testing"
)

func TestCalculate(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want string
		err  string // part of the error; "" means success
	}{
		{name: "integer arithmetic", expr: "1 + 2 * 3", want: "7"},
		{name: "parentheses", expr: "(17 * 23) % 7", want: "6"},
		{name: "exact division", expr: "12 / 4", want: "3"},
		{name: "fractional division", expr: "7 / 2", want: "3.5"},
		{name: "power", expr: "2 ** 10", want: "1024"},
		{name: "caret power", expr: "2 ^ 0.5", want: "1.4142135623730951"},
		{name: "negative power", expr: "2 ** -1", want: "0.5"},
		{name: "unary minus", expr: "-3 + +4", want: "1"},
		{name: "float sum", expr: "0.1 + 0.2", want: "0.30000000000000004"},
		{name: "big integer exact", expr: "3037000499 * 3037000499", want: "9223372030926249001"},
		{name: "integer overflow becomes float", expr: "9223372036854775807 + 1", want: "9.223372036854776e+18"},
		{name: "multiplication overflow becomes float", expr: "4294967296 * 4294967296", want: "1.8446744073709552e+19"},
		{name: "large power", expr: "2 ** 100", want: "1.2676506002282294e+30"},
		{name: "pi and e", expr: "round(pi * 1000) + floor(e)", want: "3144"},
		{name: "functions", expr: "sqrt(16) + abs(-2) + pow(2, 3) + ceil(1.2)", want: "16"},
		{name: "min and max", expr: "max(1, 7, 3) - min(4, -2)", want: "9"},
		{name: "log and exp", expr: "log(exp(2))", want: "2"},
		{name: "trigonometry", expr: "sin(0) + cos(0) + tan(0)", want: "1"},
		{name: "comparison", expr: "2 > 1 && 3 <= 3", want: "true"},
		{name: "ternary", expr: "1 > 2 ? 10 : 20", want: "20"},
		{name: "float modulo", expr: "7.5 % 2", want: "1.5"},
		{name: "whitespace", expr: "  1+1  ", want: "2"},

		{name: "division by zero", expr: "1 / 0", err: "division by zero"},
		{name: "float division by zero", expr: "1.5 / (2 - 2)", err: "division by zero"},
		{name: "modulo by zero", expr: "5 % 0", err: "modulo by zero"},
		{name: "zero to a negative power", expr: "0 ** -1", err: "division by zero"},
		{name: "float overflow", expr: "10.0 ** 400", err: "too large"},
		{name: "square root of a negative", expr: "sqrt(-1)", err: "sqrt(-1) has no finite real value"},
		{name: "log of zero", expr: "log(0)", err: "no finite real value"},
		{name: "wrong argument count", expr: "sqrt(1, 2)", err: "sqrt takes 1 argument(s), got 2"},
		{name: "max without arguments", expr: "max()", err: "at least one argument"},
		{name: "boolean operand", expr: "sqrt(true)", err: "expected a number, got a boolean"},
		{name: "unknown identifier", expr: "x + 1", err: `unknown name "x"`},
		{name: "environment access", expr: "$env", err: `unknown name "$env"`},
		{name: "internal operator name", expr: "$div(1, 0)", err: `unknown name "$div"`},
		{name: "builtin function", expr: "len(\"abc\")", err: `unknown name "len"`},
		{name: "unknown function", expr: "system(1)", err: `unknown name "system"`},
		{name: "strings", expr: `"a" + "b"`, err: "text is not allowed"},
		{name: "range", expr: "1..1000000000", err: `operator ".." is not allowed`},
		{name: "list", expr: "[1, 2, 3]", err: "a list is not allowed"},
		{name: "map", expr: "{a: 1}", err: "not allowed"},
		{name: "predicate", expr: "map([1], # * 2)", err: "not allowed"},
		{name: "member access", expr: "pi.x", err: "not allowed"},
		{name: "variable", expr: "let x = 1; x", err: `unknown name "x"`},
		{name: "matches", expr: `1 matches 2`, err: "not allowed"},
		{name: "nil", expr: "nil", err: "nil is not allowed"},
		{name: "syntax error", expr: "1 +", err: "cannot parse the expression"},
		{name: "empty", expr: "   ", err: "expression is empty"},
		{name: "too long", expr: strings.Repeat("1+", 600) + "1", err: "the limit is 1000"},
		{name: "too many nodes", expr: strings.Repeat("1+", 450) + "1", err: "cannot parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The second pass runs the program kept by the first.
			for pass := range 2 {
				got, err := Calculate(tt.expr)
				if tt.err != "" {
					if err == nil {
						t.Fatalf("pass %d: Calculate(%q) = %q, want an error containing %q", pass, tt.expr, got, tt.err)
					}
					wantErr(t, err, tt.err)
					continue
				}
				if err != nil {
					t.Fatalf("pass %d: Calculate(%q): %v", pass, tt.expr, err)
				}
				if got != tt.want {
					t.Fatalf("pass %d: Calculate(%q) = %q, want %q", pass, tt.expr, got, tt.want)
				}
			}
		})
	}
}

func TestCalculateTool(t *testing.T) {
	e := newTestEnv(t)
	out, err := e.call("calculate", `{"expression":"6 * 7"}`)
	if err != nil || out != "42" {
		t.Fatalf("calculate = %q, %v; want 42", out, err)
	}
	_, err = e.call("calculate", `{"expression":"1/0"}`)
	wantErr(t, err, "division by zero")
}
