package builtin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

const (
	calculateTimeout = 5 * time.Second
	maxExprLen       = 1000
	maxExprNodes     = 400
)

// Internal names of the arithmetic operators, rewritten into calls so that
// integer overflow, division by zero and non-finite results give errors.
// They cannot be typed: every user identifier is checked against
// calcFuncs and calcConsts before the rewrite.
const (
	opAdd = "$add"
	opSub = "$sub"
	opMul = "$mul"
	opDiv = "$div"
	opMod = "$mod"
	opPow = "$pow"
	opNeg = "$neg"
)

// calcConsts are the identifiers an expression may use as values.
var calcConsts = map[string]any{"pi": math.Pi, "e": math.E}

// calcFunc is one function an expression may call.
type calcFunc struct {
	args    int // exact argument count; 0 means one or more
	fn      func(x []float64) float64
	summary string
}

var calcFuncs = map[string]calcFunc{
	"abs":   {1, func(x []float64) float64 { return math.Abs(x[0]) }, "absolute value"},
	"sqrt":  {1, func(x []float64) float64 { return math.Sqrt(x[0]) }, "square root"},
	"pow":   {2, func(x []float64) float64 { return math.Pow(x[0], x[1]) }, "pow(x, y) = x to the power y"},
	"floor": {1, func(x []float64) float64 { return math.Floor(x[0]) }, "round down"},
	"ceil":  {1, func(x []float64) float64 { return math.Ceil(x[0]) }, "round up"},
	"round": {1, func(x []float64) float64 { return math.Round(x[0]) }, "round half away from zero"},
	"min":   {0, func(x []float64) float64 { return slices.Min(x) }, "smallest argument"},
	"max":   {0, func(x []float64) float64 { return slices.Max(x) }, "largest argument"},
	"log":   {1, func(x []float64) float64 { return math.Log(x[0]) }, "natural logarithm"},
	"exp":   {1, func(x []float64) float64 { return math.Exp(x[0]) }, "e to the power x"},
	"sin":   {1, func(x []float64) float64 { return math.Sin(x[0]) }, "sine (radians)"},
	"cos":   {1, func(x []float64) float64 { return math.Cos(x[0]) }, "cosine (radians)"},
	"tan":   {1, func(x []float64) float64 { return math.Tan(x[0]) }, "tangent (radians)"},
}

// Operators an expression may use, besides the arithmetic ones rewritten
// into calls.
var (
	calcBinary = map[string]string{
		"+": opAdd, "-": opSub, "*": opMul, "/": opDiv, "%": opMod, "**": opPow, "^": opPow,
		"==": "", "!=": "", "<": "", "<=": "", ">": "", ">=": "",
		"&&": "", "||": "", "and": "", "or": "",
	}
	calcUnary = map[string]string{"-": opNeg, "+": "", "!": "", "not": ""}
)

func calculateTool() toolkit.Tool {
	names := make([]string, 0, len(calcFuncs))
	for n := range calcFuncs {
		names = append(names, n)
	}
	slices.Sort(names)
	return toolkit.Tool{
		Name: "calculate",
		Description: "Evaluate an arithmetic expression and return its value. Operators: + - * / % ** (or ^), " +
			"comparisons, && || !, and cond ? a : b. Functions: " + strings.Join(names, ", ") +
			" (min and max take any number of arguments; trigonometry in radians). Constants: pi, e. " +
			"Integers are exact until they overflow, then floating point.",
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"expression": {
					"type": "string",
					"description": "The expression, e.g. \"(17 * 23) % 7\" or \"sqrt(2) * pi\".",
					"minLength": 1,
					"maxLength": 1000
				}
			},
			"required": ["expression"],
			"additionalProperties": false
		}`),
		Concurrent: true,
		ReadOnly:   true,
		Timeout:    calculateTimeout,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			if err := ctx.Err(); err != nil {
				return toolkit.Result{}, err
			}
			v, err := Calculate(c.Args.String("expression"))
			if err != nil {
				return toolkit.Result{}, err
			}
			return toolkit.Result{Content: v}, nil
		},
	}
}

// Calculate evaluates an arithmetic expression the way the calculate tool
// does and returns its value as text.
func Calculate(expression string) (string, error) {
	expression = strings.TrimSpace(expression)
	switch {
	case expression == "":
		return "", errors.New("expression is empty")
	case len(expression) > maxExprLen:
		return "", fmt.Errorf("expression is %d characters long; the limit is %d", len(expression), maxExprLen)
	}
	program, err := calcPrograms.compile(expression)
	if err != nil {
		return "", err
	}
	out, err := expr.Run(program, calcConsts)
	if err != nil {
		return "", fmt.Errorf("cannot evaluate the expression: %s", firstLine(err.Error()))
	}
	return formatValue(out)
}

// calcGuard rejects every construct but numbers, the listed constants,
// functions and operators, and rewrites arithmetic into checked calls. Walk
// visits children first, so rewritten nodes are never visited again.
type calcGuard struct{ err error }

func (g *calcGuard) Visit(node *ast.Node) {
	if g.err != nil {
		return
	}
	switch n := (*node).(type) {
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
	case *ast.IdentifierNode:
		_, isConst := calcConsts[n.Value]
		_, isFunc := calcFuncs[n.Value]
		if !isConst && !isFunc {
			g.err = fmt.Errorf("unknown name %q; allowed are the constants pi and e and the functions %s", n.Value, funcNames())
		}
	case *ast.CallNode:
		id, ok := n.Callee.(*ast.IdentifierNode)
		if !ok {
			g.err = errors.New("only the listed functions can be called")
			return
		}
		if _, ok := calcFuncs[id.Value]; !ok {
			g.err = fmt.Errorf("%s is not a function; allowed are %s", id.Value, funcNames())
		}
	case *ast.UnaryNode:
		op, ok := calcUnary[n.Operator]
		if !ok {
			g.err = fmt.Errorf("operator %q is not allowed", n.Operator)
			return
		}
		if op != "" {
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: op}, Arguments: []ast.Node{n.Node}})
		}
	case *ast.BinaryNode:
		op, ok := calcBinary[n.Operator]
		if !ok {
			g.err = fmt.Errorf("operator %q is not allowed", n.Operator)
			return
		}
		if op != "" {
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: op}, Arguments: []ast.Node{n.Left, n.Right}})
		}
	case *ast.ConditionalNode:
	case *ast.StringNode, *ast.BytesNode:
		g.err = errors.New("text is not allowed; the expression must be arithmetic")
	default:
		g.err = fmt.Errorf("%s is not allowed; use numbers, operators, pi, e and the functions %s", nodeKind(n), funcNames())
	}
}

func nodeKind(n ast.Node) string {
	switch n.(type) {
	case *ast.ArrayNode:
		return "a list"
	case *ast.MapNode, *ast.PairNode:
		return "a map"
	case *ast.MemberNode, *ast.ChainNode:
		return "member access"
	case *ast.SliceNode:
		return "slicing"
	case *ast.BuiltinNode, *ast.PredicateNode, *ast.PointerNode:
		return "a builtin function"
	case *ast.VariableDeclaratorNode, *ast.SequenceNode:
		return "a variable or sequence"
	case *ast.NilNode:
		return "nil"
	}
	return "this construct"
}

func funcNames() string {
	names := make([]string, 0, len(calcFuncs))
	for n := range calcFuncs {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// call adapts a math function to expr, checking its arguments and result.
func (f calcFunc) call(name string) func(params ...any) (any, error) {
	return func(params ...any) (any, error) {
		switch {
		case f.args > 0 && len(params) != f.args:
			return nil, fmt.Errorf("%s takes %d argument(s), got %d", name, f.args, len(params))
		case f.args == 0 && len(params) == 0:
			return nil, fmt.Errorf("%s takes at least one argument", name)
		}
		x := make([]float64, len(params))
		for i, p := range params {
			v, err := toFloat(p)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			x[i] = v
		}
		r := f.fn(x)
		if math.IsNaN(r) || math.IsInf(r, 0) {
			return nil, fmt.Errorf("%s(%s) has no finite real value", name, joinFloats(x))
		}
		return r, nil
	}
}

// calcOps implements the arithmetic operators: integers stay exact while
// they fit, and become floating point when they would overflow.
var calcOps = map[string]func(params ...any) (any, error){
	opAdd: intOrFloat(func(a, b int) (int, bool) {
		s := a + b
		return s, (s > a) == (b > 0)
	}, func(a, b float64) (float64, error) { return a + b, nil }),
	opSub: intOrFloat(func(a, b int) (int, bool) {
		d := a - b
		return d, (d < a) == (b > 0)
	}, func(a, b float64) (float64, error) { return a - b, nil }),
	opMul: intOrFloat(func(a, b int) (int, bool) {
		if a == 0 || b == 0 {
			return 0, true
		}
		hi, lo := bits.Mul64(uint64(absInt(a)), uint64(absInt(b)))
		if hi != 0 || lo > math.MaxInt64 || a == math.MinInt64 || b == math.MinInt64 {
			return 0, false
		}
		if (a < 0) != (b < 0) {
			return -int(lo), true
		}
		return int(lo), true
	}, func(a, b float64) (float64, error) { return a * b, nil }),
	opDiv: intOrFloat(func(a, b int) (int, bool) {
		if b == 0 || a%b != 0 || (a == math.MinInt64 && b == -1) {
			return 0, false
		}
		return a / b, true
	}, func(a, b float64) (float64, error) {
		if b == 0 {
			return 0, errors.New("division by zero")
		}
		return a / b, nil
	}),
	opMod: intOrFloat(func(a, b int) (int, bool) {
		if b == 0 || b == -1 {
			return 0, b == -1
		}
		return a % b, true
	}, func(a, b float64) (float64, error) {
		if b == 0 {
			return 0, errors.New("modulo by zero")
		}
		return math.Mod(a, b), nil
	}),
	opPow: intOrFloat(func(a, b int) (int, bool) {
		if b < 0 {
			return 0, false
		}
		r := 1
		for ; b > 0; b-- {
			if a == 0 || a == 1 {
				return a, true
			}
			if a == -1 {
				if b%2 == 0 {
					return 1, true
				}
				return -1, true
			}
			hi, lo := bits.Mul64(uint64(absInt(r)), uint64(absInt(a)))
			if hi != 0 || lo > math.MaxInt64 {
				return 0, false
			}
			if (r < 0) != (a < 0) {
				r = -int(lo)
			} else {
				r = int(lo)
			}
		}
		return r, true
	}, func(a, b float64) (float64, error) {
		if a == 0 && b < 0 {
			return 0, errors.New("division by zero (zero to a negative power)")
		}
		return math.Pow(a, b), nil
	}),
	opNeg: func(params ...any) (any, error) {
		if len(params) != 1 {
			return nil, errors.New("negation takes one operand")
		}
		switch v := params[0].(type) {
		case int:
			if v != math.MinInt64 {
				return -v, nil
			}
			return -float64(v), nil
		case float64:
			return -v, nil
		}
		return nil, fmt.Errorf("cannot negate %s", describeValue(params[0]))
	},
}

// intOrFloat builds a binary operator that uses the exact integer form when
// both operands are integers and it reports success, and floating point
// otherwise. A non-finite floating point result is an error.
func intOrFloat(intOp func(a, b int) (int, bool), floatOp func(a, b float64) (float64, error)) func(params ...any) (any, error) {
	return func(params ...any) (any, error) {
		if len(params) != 2 {
			return nil, errors.New("operator takes two operands")
		}
		if a, ok := params[0].(int); ok {
			if b, ok := params[1].(int); ok {
				if r, ok := intOp(a, b); ok {
					return r, nil
				}
			}
		}
		a, err := toFloat(params[0])
		if err != nil {
			return nil, err
		}
		b, err := toFloat(params[1])
		if err != nil {
			return nil, err
		}
		r, err := floatOp(a, b)
		if err != nil {
			return nil, err
		}
		if math.IsNaN(r) {
			return nil, errors.New("the result is not a real number")
		}
		if math.IsInf(r, 0) {
			return nil, errors.New("the result is too large (overflow)")
		}
		return r, nil
	}
}

func absInt(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func toFloat(v any) (float64, error) {
	switch n := v.(type) {
	case int:
		return float64(n), nil
	case float64:
		return n, nil
	}
	return 0, fmt.Errorf("expected a number, got %s", describeValue(v))
}

func describeValue(v any) string {
	switch v.(type) {
	case bool:
		return "a boolean"
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("%T", v)
}

func joinFloats(x []float64) string {
	s := make([]string, len(x))
	for i, v := range x {
		s[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(s, ", ")
}

// formatValue prints a result: integers exactly, floats in the shortest form
// that reads back the same (whole floats of moderate size without a
// fraction).
func formatValue(v any) (string, error) {
	switch n := v.(type) {
	case int:
		return strconv.Itoa(n), nil
	case float64:
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return "", errors.New("the result is not a finite number")
		}
		if n == math.Trunc(n) && math.Abs(n) < 1e15 {
			return strconv.FormatFloat(n, 'f', -1, 64), nil
		}
		return strconv.FormatFloat(n, 'g', -1, 64), nil
	case bool:
		return strconv.FormatBool(n), nil
	}
	return "", fmt.Errorf("the expression gave %s, not a number", describeValue(v))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
