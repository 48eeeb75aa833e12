package toolkit

import (
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// defaultRegexTimeout bounds one match of a schema's `pattern`,
// `patternProperties` or `format: regex` value. ECMA-262 patterns may
// backtrack exponentially ("^(a+)+$" against "aaaa…b"); past the bound the
// match counts as failed and the field's message says the pattern timed out.
const defaultRegexTimeout = 200 * time.Millisecond

// ecmaEngine compiles JSON Schema patterns as ECMA-262 regular expressions
// (the dialect JSON Schema names): lookahead, lookbehind, backreferences and
// `\cX` work, which Go's RE2 refuses.
//
// The validator library checks `format: regex` values with the same engine
// after compiling; once compiled is set, a policy that annotates regex gets
// every value accepted.
func ecmaEngine(timeout time.Duration, compiled *atomic.Bool, annotateRegex bool) jsonschema.RegexpEngine {
	return func(pattern string) (jsonschema.Regexp, error) {
		if annotateRegex && compiled.Load() {
			return nil, nil
		}
		re, err := regexp2.Compile(pattern, regexp2.ECMAScript|regexp2.Unicode)
		if err != nil {
			return nil, fmt.Errorf("not an ECMA-262 regular expression: %w", err)
		}
		re.MatchTimeout = timeout
		return &ecmaRegexp{re: re}, nil
	}
}

// ecmaRegexp adapts a regexp2 expression to jsonschema.Regexp.
type ecmaRegexp struct {
	re *regexp2.Regexp // immutable after compile; safe for concurrent matching
}

func (r *ecmaRegexp) String() string { return r.re.String() }

// MatchString reports whether s contains a match. A match that runs past the
// timeout (or the backtracking limit) reports false and is remembered, so
// the field's message can say why.
func (r *ecmaRegexp) MatchString(s string) bool {
	ok, err := r.re.MatchString(s)
	if err != nil {
		regexTimeouts.add(r.re.String(), s, r.re.MatchTimeout)
		return false
	}
	return ok
}

// regexTimeouts remembers the last few (pattern, value) pairs whose match
// gave up, keyed by a hash so no value is kept. Safe for concurrent use.
var regexTimeouts = &timeoutSet{seen: map[[32]byte]time.Duration{}}

// maxTimeoutsKept bounds regexTimeouts.
const maxTimeoutsKept = 64

type timeoutSet struct {
	mu    sync.Mutex
	seen  map[[32]byte]time.Duration // guarded by mu; the bound that was passed
	order [][32]byte                 // guarded by mu; oldest first
}

func timeoutKey(pattern, value string) [32]byte {
	h := sha256.New()
	h.Write([]byte(pattern))
	h.Write([]byte{0})
	h.Write([]byte(value))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

func (t *timeoutSet) add(pattern, value string, bound time.Duration) {
	k := timeoutKey(pattern, value)
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.seen[k]; ok {
		return
	}
	if len(t.order) >= maxTimeoutsKept {
		delete(t.seen, t.order[0])
		t.order = t.order[1:]
	}
	t.seen[k] = bound
	t.order = append(t.order, k)
}

// bound returns the match bound a (pattern, value) pair ran past, if it did.
func (t *timeoutSet) bound(pattern, value string) (time.Duration, bool) {
	k := timeoutKey(pattern, value)
	t.mu.Lock()
	defer t.mu.Unlock()
	d, ok := t.seen[k]
	return d, ok
}
