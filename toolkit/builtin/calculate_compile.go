package builtin

import (
	"container/list"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/compiler"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/optimizer"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

// Bounds of the compiled programs kept for reuse: a count, and the total
// length of their expressions. A program holds about 120 bytes per
// character of its expression (44 KB for 381 characters), so the text
// budget keeps the cache within about 2 MB however long the expressions.
const (
	calcProgramCacheSize  = 256
	calcProgramCacheBytes = 16 << 10
)

// calcPrograms compiles the calculator's expressions; shared by every
// calculate call of the process.
var calcPrograms = newCalcCompiler(calcProgramCacheSize, calcProgramCacheBytes)

// calcCompiler turns expressions into checked programs. Building an expr
// configuration (its hundred builtins put into a map and taken out again,
// twenty functions) cost more than compiling a short expression, so
// configurations are built once and kept in a free list; a configuration
// caches type information while it compiles, so each is used by one
// compilation at a time. Compiled programs are immutable and safe to run
// concurrently, and the most recently used ones are kept, keyed by the
// expression. Safe for concurrent use.
type calcCompiler struct {
	configs chan *conf.Config // free configurations

	// immutable after newCalcCompiler
	maxEntries, maxBytes int

	mu      sync.Mutex               // guards the fields below
	order   *list.List               // of *calcEntry, most recently used first
	entries map[string]*list.Element // by expression
	bytes   int                      // total length of the kept expressions
}

type calcEntry struct {
	expression string
	program    *vm.Program
}

func newCalcCompiler(maxEntries, maxBytes int) *calcCompiler {
	return &calcCompiler{
		configs:    make(chan *conf.Config, 2*runtime.GOMAXPROCS(0)),
		maxEntries: maxEntries,
		maxBytes:   maxBytes,
		order:      list.New(),
		entries:    make(map[string]*list.Element, maxEntries),
	}
}

// compile returns the program of expression, from the cache or compiled.
// The expression must be trimmed and within maxExprLen. The error is the
// one the calculate tool reports.
func (c *calcCompiler) compile(expression string) (*vm.Program, error) {
	if p := c.cached(expression); p != nil {
		return p, nil
	}
	cfg := c.config()
	p, err := compileCalc(expression, cfg)
	select {
	case c.configs <- cfg:
	default:
	}
	if err != nil {
		return nil, err
	}
	c.add(expression, p)
	return p, nil
}

func (c *calcCompiler) cached(expression string) *vm.Program {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[expression]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	return e.Value.(*calcEntry).program
}

func (c *calcCompiler) add(expression string, p *vm.Program) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[expression]; ok || len(expression) > c.maxBytes {
		return
	}
	c.entries[expression] = c.order.PushFront(&calcEntry{expression: expression, program: p})
	c.bytes += len(expression)
	for c.order.Len() > c.maxEntries || c.bytes > c.maxBytes {
		last := c.order.Back()
		c.order.Remove(last)
		e := last.Value.(*calcEntry)
		delete(c.entries, e.expression)
		c.bytes -= len(e.expression)
	}
}

func (c *calcCompiler) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// config takes a free configuration or builds one.
func (c *calcCompiler) config() *conf.Config {
	select {
	case cfg := <-c.configs:
		return cfg
	default:
		return newCalcConfig()
	}
}

// newCalcConfig is the calculator's configuration: the constants, the
// listed functions and the checked operators, no builtins, a node limit.
// It is what expr.Compile builds from these options, without the patch
// that calcGuard applies per compilation.
func newCalcConfig() *conf.Config {
	opts := []expr.Option{
		expr.Env(calcConsts),
		expr.DisableAllBuiltins(),
		expr.MaxNodes(maxExprNodes),
	}
	for name, f := range calcFuncs {
		opts = append(opts, expr.Function(name, f.call(name)))
	}
	for name, fn := range calcOps {
		opts = append(opts, expr.Function(name, fn))
	}
	cfg := conf.CreateNew()
	for _, op := range opts {
		op(cfg)
	}
	for name := range cfg.Disabled {
		delete(cfg.Builtins, name)
	}
	return cfg
}

// compileCalc is expr.Compile with a configuration built beforehand: parse,
// let calcGuard refuse what is not arithmetic and rewrite the operators,
// type-check, optimise, compile.
func compileCalc(expression string, cfg *conf.Config) (*vm.Program, error) {
	tree, err := parser.ParseWithConfig(expression, cfg)
	if err != nil {
		return nil, parseError(err)
	}
	var guard calcGuard
	ast.Walk(&tree.Node, &guard)
	if guard.err != nil {
		return nil, guard.err
	}
	if _, err := new(checker.Checker).Check(tree, cfg); err != nil {
		return nil, parseError(err)
	}
	if cfg.Optimize {
		if err := optimizer.Optimize(&tree.Node, cfg); err != nil {
			var fe *file.Error
			if errors.As(err, &fe) {
				err = fe.Bind(tree.Source)
			}
			return nil, parseError(err)
		}
	}
	p, err := compiler.Compile(tree, cfg)
	if err != nil {
		return nil, parseError(err)
	}
	return p, nil
}

func parseError(err error) error {
	return fmt.Errorf("cannot parse the expression: %s", firstLine(err.Error()))
}
