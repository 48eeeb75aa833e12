package toolkit

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// defaultRegexTimeout bounds one match of a schema's `pattern`,
// `patternProperties` or `propertyNames` pattern. ECMA-262 patterns may
// backtrack exponentially ("^(a+)+$" against "aaaa…b"); past the bound the
// match gives up and the arguments are refused, saying why (match.go).
const defaultRegexTimeout = 200 * time.Millisecond

// maxRegexNesting bounds how deeply groups nest in a pattern or a
// `format: regex` value: the regular expression compiler recurses over
// groups, and half a million nested groups (1 MiB of parentheses) exhaust
// the goroutine stack, which no recover survives.
const maxRegexNesting = 256

// errNotChecked is the format error of a `format: regex` value left
// unchecked because matching had stopped; the stop refuses the arguments.
var errNotChecked = errors.New("not checked: the matching budget is spent")

// schemaInstance is one compiled copy of a schema. Its regular expressions
// are its own, so the one validation that holds the instance may set their
// timeouts per match; run is that validation's matching.
type schemaInstance struct {
	sch *jsonschema.Schema
	// compiled: compiling is over, so the engine is now asked only for
	// `format: regex` values.
	compiled bool
	// patterns: compiling met a pattern.
	patterns bool
	bound    time.Duration // of one match
	run      *matchRun     // nil between validations
	steps    *stepGraph    // what counting the evaluations needs
}

// engine compiles JSON Schema patterns as ECMA-262 regular expressions
// (the dialect JSON Schema names): lookahead, lookbehind, backreferences
// and `\cX` work, which Go's RE2 refuses. The schema's own patterns are
// taken as regexp2 reads them; once compiled is set, the engine checks
// `format: regex` values, strictly (checkECMA) and within the validation's
// budget, or accepts them all when the policy annotates regex.
func (inst *schemaInstance) engine(annotateRegex bool) jsonschema.RegexpEngine {
	return func(pattern string) (jsonschema.Regexp, error) {
		if inst.compiled {
			if annotateRegex {
				return nil, nil
			}
			return nil, inst.checkRegexValue(pattern)
		}
		inst.patterns = true
		if err := checkECMA(pattern, false); err != nil {
			return nil, fmt.Errorf("not an ECMA-262 regular expression: %w", err)
		}
		re, err := regexp2.Compile(pattern, regexp2.ECMAScript|regexp2.Unicode)
		if err != nil {
			return nil, fmt.Errorf("not an ECMA-262 regular expression: %w", err)
		}
		re.MatchTimeout = inst.bound
		return &ecmaRegexp{re: re, inst: inst}, nil
	}
}

// checkRegexValue checks a `format: regex` value; compiling it counts
// against the validation's budget.
func (inst *schemaInstance) checkRegexValue(s string) error {
	if err := checkECMA(s, true); err != nil {
		return err
	}
	run := inst.run
	if run == nil {
		_, err := regexp2.Compile(s, regexp2.ECMAScript|regexp2.Unicode)
		return err
	}
	if run.allowance() <= 0 {
		return errNotChecked
	}
	start := run.now()
	_, err := regexp2.Compile(s, regexp2.ECMAScript|regexp2.Unicode)
	run.spend(run.now().Sub(start))
	return err
}

// ecmaRegexp adapts a regexp2 expression to jsonschema.Regexp.
type ecmaRegexp struct {
	re   *regexp2.Regexp
	inst *schemaInstance
}

func (r *ecmaRegexp) String() string { return r.re.String() }

// MatchString reports whether s contains a match, within the bounds of the
// validation holding the instance (matchRun.match).
func (r *ecmaRegexp) MatchString(s string) bool {
	if run := r.inst.run; run != nil {
		return run.match(r.re, s)
	}
	// Not reached: a schema with patterns is validated with a run.
	ok, err := r.re.MatchString(s)
	return ok && err == nil
}

// checkECMA checks what regexp2 does not: groups nested no deeper than
// maxRegexNesting and, when strict (a `format: regex` value), the ECMA-262
// syntax regexp2's ECMAScript mode is lenient about: escapes are those of
// Unicode mode (no `\a`, `\e`, `\z`…), and no .NET or Python group syntax
// (`(?#…)`, `(?i)`, `(?P<n>…)`). Modifier groups (`(?i:…)`, ES2025) stay
// valid.
func checkECMA(p string, strict bool) error {
	depth := 0
	inClass := false
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\':
			if i+1 == len(p) {
				return errors.New("ends with a lone backslash")
			}
			if strict {
				if err := checkEscape(p, i+1, inClass); err != nil {
					return err
				}
			}
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
		case c == '(':
			if depth++; depth > maxRegexNesting {
				return fmt.Errorf("groups nested deeper than %d", maxRegexNesting)
			}
			if strict && i+1 < len(p) && p[i+1] == '?' {
				if err := checkGroup(p[i+2:]); err != nil {
					return err
				}
			}
		case c == ')':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}

// checkGroup checks what follows "(?" in a strict pattern.
func checkGroup(rest string) error {
	if rest == "" {
		return errors.New(`"(?" ends the pattern`)
	}
	switch rest[0] {
	case ':', '=', '!':
		return nil
	case '<':
		return nil // lookbehind or a named group; regexp2 checks the rest
	}
	flags := strings.TrimLeft(rest, "ims-")
	if len(flags) < len(rest) && flags != "" {
		switch flags[0] {
		case ':':
			return nil
		case ')':
			return fmt.Errorf("inline flags %q are not ECMA-262 (only a modifier group such as (?i:…) is)", "(?"+rest[:len(rest)-len(flags)+1])
		}
	}
	r := rest
	if len(r) > 1 {
		r = r[:1]
	}
	return fmt.Errorf("(?%s is not ECMA-262 group syntax", r)
}

// checkEscape checks the escape whose letter is p[j] under ECMA-262's
// Unicode mode.
func checkEscape(p string, j int, inClass bool) error {
	c := p[j]
	next := func(k int) byte {
		if j+k < len(p) {
			return p[j+k]
		}
		return 0
	}
	switch {
	case strings.IndexByte(`^$\.*+?()[]{}|/`, c) >= 0:
		return nil
	case strings.IndexByte("dDwWsSfnrtv", c) >= 0:
		return nil
	case c == 'b':
		return nil
	case c == 'B' && !inClass:
		return nil
	case c == '-' && inClass:
		return nil
	case c == 'c':
		if n := next(1); n >= 'a' && n <= 'z' || n >= 'A' && n <= 'Z' {
			return nil
		}
		return errors.New(`\c must be followed by a letter`)
	case c == '0':
		if n := next(1); n >= '0' && n <= '9' {
			return errors.New(`\0 followed by a digit is not ECMA-262 (no octal escapes)`)
		}
		return nil
	case c >= '1' && c <= '9':
		if inClass {
			return fmt.Errorf(`\%c in a character class is not ECMA-262`, c)
		}
		return nil
	case c == 'x':
		if isHex(next(1)) && isHex(next(2)) {
			return nil
		}
		return errors.New(`\x must be followed by two hex digits`)
	case c == 'u':
		if next(1) == '{' || isHex(next(1)) && isHex(next(2)) && isHex(next(3)) && isHex(next(4)) {
			return nil
		}
		return errors.New(`\u must be followed by four hex digits or {…}`)
	case c == 'p' || c == 'P':
		if next(1) == '{' {
			return nil
		}
		return fmt.Errorf(`\%c must be followed by {…}`, c)
	case c == 'k' && !inClass:
		if next(1) == '<' {
			return nil
		}
		return errors.New(`\k must be followed by <name>`)
	}
	if c < 0x80 {
		return fmt.Errorf(`\%c is not an ECMA-262 escape`, c)
	}
	return errors.New("a backslash before a non-ASCII character is not an ECMA-262 escape")
}
