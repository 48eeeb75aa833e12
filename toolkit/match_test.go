package toolkit

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// stepClock is a clock each reading of which is step later than the one
// before: every match measured with it takes exactly step, whatever the
// machine does. It counts its readings (two per match).
type stepClock struct {
	mu     sync.Mutex
	t      time.Time
	step   time.Duration
	reads  int
	onRead func(n int) // called with the reading's number, if set
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	c.reads++
	n := c.reads
	c.t = c.t.Add(c.step)
	t, f := c.t, c.onRead
	c.mu.Unlock()
	if f != nil {
		f(n)
	}
	return t
}

func (c *stepClock) matches() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads / 2
}

// itemsSchema checks every item of "items" against a pattern each of the
// items below matches quickly.
const itemsSchema = `{"type":"object","properties":{"items":{"type":"array","items":{"type":"string","pattern":"^item-[0-9]+$"}}}}`

func items(n int) map[string]any {
	out := make([]any, n)
	for i := range out {
		out[i] = "item-" + strconv.Itoa(i)
	}
	return map[string]any{"items": out}
}

// TestCallMatchBudget: with every match taking 300 ms, a call of 400 items
// and a 1 s budget runs four matches (the fourth started with 100 ms left)
// and is refused; without the budget the same items are valid.
func TestCallMatchBudget(t *testing.T) {
	clock := &stepClock{step: 300 * time.Millisecond}
	c := NewSchemaCache(WithMatchBudgets(time.Second, time.Hour))
	c.now = clock.now
	s := mustCompile(t, c, itemsSchema)
	err := s.Validate(items(400))
	if !errors.Is(err, ErrMatchBudget) {
		t.Fatalf("Validate = %v, want ErrMatchBudget", err)
	}
	if got := clock.matches(); got != 4 {
		t.Errorf("%d matches run, want 4", got)
	}
	want := "arguments: not checked in full: matching the schema's patterns used this call's whole budget (1s, 4 matches), so the arguments are refused; send fewer or shorter values"
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Message != want {
		t.Errorf("Validate = %v, want only %q", err, want)
	}
	if err := s.Validate(items(3)); err != nil {
		t.Errorf("three items: %v", err)
	}
}

// TestTurnMatchBudgetShared: calls of one turn draw on one budget; each
// call's own budget still holds, and a schema without patterns never
// touches the budget.
func TestTurnMatchBudgetShared(t *testing.T) {
	clock := &stepClock{step: 100 * time.Millisecond}
	c := NewSchemaCache(WithMatchBudgets(time.Hour, time.Second))
	c.now = clock.now
	s := mustCompile(t, c, itemsSchema)
	plain := mustCompile(t, c, `{"type":"object","properties":{"items":{"type":"array","items":{"type":"string","minLength":2}}}}`)
	turn := c.NewTurnBudget()
	if err := s.Check(context.Background(), items(6), turn); err != nil {
		t.Fatalf("first call: %v", err)
	}
	if got := turn.Left(); got != 400*time.Millisecond {
		t.Errorf("left after 6 matches of 100ms: %s, want 400ms", got)
	}
	err := s.Check(context.Background(), items(6), turn)
	if !errors.Is(err, ErrMatchBudget) || !strings.Contains(err.Error(), "this turn's budget for matching schema patterns (1s) is spent") {
		t.Fatalf("second call = %v, want the turn's budget named", err)
	}
	if got := clock.matches(); got != 10 {
		t.Errorf("%d matches run, want 10 (6, then 4 until the turn's budget is spent)", got)
	}
	if err := plain.Check(context.Background(), items(6), turn); err != nil {
		t.Errorf("a schema without patterns: %v", err)
	}
	if err := s.Check(context.Background(), items(1), c.NewTurnBudget()); err != nil {
		t.Errorf("a new turn's budget: %v", err)
	}
}

// TestCheckCanceled: an ended context stops matching: none when it ended
// before, none after the match that saw it end.
func TestCheckCanceled(t *testing.T) {
	t.Run("before", func(t *testing.T) {
		clock := &stepClock{step: time.Millisecond}
		c := NewSchemaCache()
		c.now = clock.now
		s := mustCompile(t, c, itemsSchema)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := s.Check(ctx, items(400), nil)
		if !errors.Is(err, ErrCheckCanceled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Check = %v, want ErrCheckCanceled and context.Canceled", err)
		}
		if got := clock.matches(); got != 0 {
			t.Errorf("%d matches run after the context ended", got)
		}
	})
	t.Run("while matching", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The context ends as the first match ends (second reading).
		clock := &stepClock{step: time.Millisecond, onRead: func(n int) {
			if n == 2 {
				cancel()
			}
		}}
		c := NewSchemaCache()
		c.now = clock.now
		s := mustCompile(t, c, itemsSchema)
		err := s.Check(ctx, items(400), nil)
		if !errors.Is(err, ErrCheckCanceled) {
			t.Fatalf("Check = %v, want ErrCheckCanceled", err)
		}
		if got := clock.matches(); got != 1 {
			t.Errorf("%d matches run, want 1", got)
		}
	})
}

// TestMatchesRememberedPerCall: a pair already matched in a validation is
// not matched again.
func TestMatchesRememberedPerCall(t *testing.T) {
	clock := &stepClock{step: time.Millisecond}
	c := NewSchemaCache()
	c.now = clock.now
	s := mustCompile(t, c, itemsSchema)
	same := make([]any, 400)
	for i := range same {
		same[i] = "item-1"
	}
	if err := s.Validate(map[string]any{"items": same}); err != nil {
		t.Fatal(err)
	}
	if got := clock.matches(); got != 1 {
		t.Errorf("%d matches for 400 equal items, want 1", got)
	}
}

// TestPatternSchemaConcurrent: validations of one schema with patterns at
// once each hold an instance of their own (run with -race): every answer
// is right, and at most maxSpareInstances instances are kept.
func TestPatternSchemaConcurrent(t *testing.T) {
	c := NewSchemaCache()
	s := mustCompile(t, c, itemsSchema)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				bad := (g+i)%2 == 0
				v := items(5)
				if bad {
					v["items"].([]any)[3] = "nope-" + strconv.Itoa(i)
				}
				err := s.Check(context.Background(), v, c.NewTurnBudget())
				if (err != nil) != bad {
					t.Errorf("goroutine %d, validation %d: Check = %v, want error %v", g, i, err, bad)
					return
				}
				if bad && !strings.Contains(err.Error(), `field "items[3]": must match pattern`) {
					t.Errorf("Check = %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.spare); n < 1 || n > maxSpareInstances {
		t.Errorf("%d spare instances kept, want 1 to %d", n, maxSpareInstances)
	}
}

// TestDeepRegexRefused: a `format: regex` value of half a million nested
// groups (1 MiB, the arguments limit) is refused; compiling it would
// exhaust the stack and end the process. A schema pattern nested as deeply
// does not compile.
func TestDeepRegexRefused(t *testing.T) {
	deep := strings.Repeat("(", 1<<19) + strings.Repeat(")", 1<<19)
	s := mustCompile(t, NewSchemaCache(), `{"properties":{"r":{"type":"string","format":"regex"}}}`)
	err := s.Validate(map[string]any{"r": deep})
	if err == nil || !strings.Contains(err.Error(), `field "r": must be a valid regex`) {
		t.Fatalf("Validate = %.300v, want the value refused", err)
	}
	if _, err := NewSchemaCache().Compile([]byte(`{"pattern":"` + deep + `"}`)); err == nil || !strings.Contains(err.Error(), "nested deeper than 256") {
		t.Fatalf("Compile = %.300v, want the pattern refused", err)
	}
	ok := strings.Repeat("(", maxRegexNesting) + "a" + strings.Repeat(")", maxRegexNesting)
	if err := s.Validate(map[string]any{"r": ok}); err != nil {
		t.Errorf("%d nested groups: %v", maxRegexNesting, err)
	}
}
