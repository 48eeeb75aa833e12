package toolkit

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dlclark/regexp2/v2"
)

// Pattern matching is bounded three ways: one match by the cache's regex
// timeout (WithRegexTimeout), one validation by the call's budget, and
// every validation of a turn together by the turn's MatchBudget
// (WithMatchBudgets). A budget counts the time spent matching `pattern`,
// `patternProperties` and `propertyNames` patterns and compiling
// `format: regex` values. Once a budget is spent nothing more is matched
// and the arguments are refused; a match that runs past its bound refuses
// them too, whatever keyword asked for it (under `not`, `if`,
// `patternProperties`, `propertyNames`, an `anyOf` alternative…): a value
// that could not be checked is never taken for one that did not match.
const (
	// defaultCallMatchBudget is the matching time one call may spend.
	defaultCallMatchBudget = time.Second
	// defaultTurnMatchBudget is the matching time all the calls of one
	// turn may spend together.
	defaultTurnMatchBudget = 3 * time.Second
)

var (
	// ErrMatchBudget is why a ValidationError refused arguments whose
	// patterns were not all matched: the call's or the turn's matching
	// budget was spent (errors.Is tells).
	ErrMatchBudget = errors.New("toolkit: the pattern-matching budget is spent")
	// ErrSchemaSteps is why a ValidationError refused arguments without
	// checking them: the schema would take more evaluations than one call
	// or the turn may take (schema_steps.go; errors.Is tells).
	ErrSchemaSteps = errors.New("toolkit: the schema would take too many steps to check the arguments")
	// ErrCheckCanceled is returned by Schema.Check when its context ended
	// while patterns were matched; the arguments were not checked in full.
	ErrCheckCanceled = errors.New("toolkit: the argument check was canceled")
)

// MatchBudget is the pattern-matching time left to the calls of one turn
// (SchemaCache.NewTurnBudget). Safe for concurrent use.
type MatchBudget struct {
	total time.Duration
	left  atomic.Int64 // nanoseconds
	steps atomic.Int64 // schema evaluations left (maxTurnSchemaSteps)
}

// NewMatchBudget returns a budget of d (d <= 0: nothing may be matched),
// with the turn's bound on schema evaluations.
func NewMatchBudget(d time.Duration) *MatchBudget {
	b := &MatchBudget{total: max(d, 0)}
	b.left.Store(int64(b.total))
	b.steps.Store(maxTurnSchemaSteps)
	return b
}

// Left returns the matching time left.
func (b *MatchBudget) Left() time.Duration { return time.Duration(b.left.Load()) }

func (b *MatchBudget) spend(d time.Duration) { b.left.Add(-int64(d)) }

// stopReason is why a validation stopped matching before it was done.
type stopReason uint8

const (
	notStopped stopReason = iota
	stoppedCall
	stoppedTurn
	stoppedCanceled
)

// gaveUp is a (pattern, text) pair whose match ran past its bound.
type gaveUp struct {
	pattern, text string
	why           string // "took longer than 200ms", "needed more backtracking than allowed"
}

// pairKey names one match: the pattern's text and the text matched.
type pairKey struct{ pattern, text string }

// answer is what one match gave.
type answer uint8

const (
	answerNo answer = iota
	answerYes
	answerGaveUp
)

// matchRun is the matching of one validation: its context, what is left of
// its budgets, the matches decided and those that gave up. Used by one
// goroutine at a time (the validation's).
type matchRun struct {
	ctx   context.Context
	bound time.Duration // of one match
	call  time.Duration // the call's whole budget
	left  time.Duration // of the call's budget
	turn  *MatchBudget  // nil: the call's budget only
	now   func() time.Time

	stop    stopReason
	matched int // matches run (and format values compiled)
	answers map[pairKey]answer
	gaveUp  []gaveUp // in the order they happened
}

func newMatchRun(ctx context.Context, bound, call time.Duration, turn *MatchBudget, now func() time.Time) *matchRun {
	if ctx == nil {
		ctx = context.Background()
	}
	return &matchRun{ctx: ctx, bound: bound, call: call, left: call, turn: turn, now: now}
}

// allowance is how long the next piece of work may take, or 0 after
// setting why matching stops.
func (m *matchRun) allowance() time.Duration {
	if m.stop != notStopped {
		return 0
	}
	if m.ctx.Err() != nil {
		m.stop = stoppedCanceled
		return 0
	}
	if m.left <= 0 {
		m.stop = stoppedCall
		return 0
	}
	allow := min(m.bound, m.left)
	if m.turn != nil {
		t := m.turn.Left()
		if t <= 0 {
			m.stop = stoppedTurn
			return 0
		}
		allow = min(allow, t)
	}
	return allow
}

// spend counts d against both budgets.
func (m *matchRun) spend(d time.Duration) {
	m.left -= d
	if m.turn != nil {
		m.turn.spend(d)
	}
	m.matched++
}

// exhausted sets why matching stops after work given less than a whole
// bound ran out of time: the budget that set the allowance.
func (m *matchRun) exhausted() {
	if m.turn != nil && m.turn.Left() <= m.left {
		m.stop = stoppedTurn
		return
	}
	m.stop = stoppedCall
}

// match reports whether re matches s, within the run's bounds. An answer it
// could not get is false, and the run remembers why: a match past its
// bound, a spent budget or an ended context each refuse the arguments
// afterwards (Schema.Check), whatever the keyword made of the false. A
// pair already matched in this run is answered from memory.
func (m *matchRun) match(re *regexp2.Regexp, s string) bool {
	k := pairKey{re.String(), s}
	if a, seen := m.answers[k]; seen {
		return a == answerYes
	}
	allow := m.allowance()
	if allow <= 0 {
		return false
	}
	// The expression belongs to this validation's schema instance: its
	// timeout may be set per match.
	re.MatchTimeout = allow
	start := m.now()
	ok, err := re.MatchString(s)
	m.spend(m.now().Sub(start))
	if m.answers == nil {
		m.answers = map[pairKey]answer{}
	}
	switch {
	case err == nil && ok:
		m.answers[k] = answerYes
		return true
	case err == nil:
		m.answers[k] = answerNo
	case errors.Is(err, regexp2.ErrBacktrackingStackLimit):
		m.giveUp(k, "needed more backtracking than allowed")
	case allow < m.bound:
		// The budget set this match's allowance: it is the budget that ran
		// out, not the match's bound.
		m.answers[k] = answerGaveUp
		m.exhausted()
	default:
		m.giveUp(k, "took longer than "+m.bound.String())
	}
	return false
}

func (m *matchRun) giveUp(k pairKey, why string) {
	m.answers[k] = answerGaveUp
	m.gaveUp = append(m.gaveUp, gaveUp{pattern: k.pattern, text: k.text, why: why})
}

// undecided reports whether the run has no true answer for pattern on s:
// it gave up on it, or never matched it because matching had stopped.
func (m *matchRun) undecided(pattern, s string) bool {
	if m == nil {
		return false
	}
	a, seen := m.answers[pairKey{pattern, s}]
	if !seen {
		return m.stop != notStopped
	}
	return a == answerGaveUp
}

// stopText says why matching stopped, for the arguments' refusal.
func (m *matchRun) stopText() string {
	switch m.stop {
	case stoppedCall:
		return fmt.Sprintf("arguments: not checked in full: matching the schema's patterns used this call's whole budget (%s, %s), so the arguments are refused; send fewer or shorter values", m.call, plural(m.matched, "match", "matches"))
	case stoppedTurn:
		return fmt.Sprintf("arguments: not checked in full: this turn's budget for matching schema patterns (%s) is spent, so the arguments are refused; send this call again in a later turn", m.turn.total)
	}
	return ""
}
