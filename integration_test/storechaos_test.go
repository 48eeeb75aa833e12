package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/faults"
	"github.com/tooldispatch/tooldispatch/cachestore/seam"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
)

// Chaos mode's storage faults in process, through the store's seam, for
// Badger, PostgreSQL and Memory alike: a seeded policy (toolkit/chaos)
// decides at each intent and commit whether to fail it (a full disk, a
// write error, a failing fsync) or slow it (a slow fsync, a stall), while
// several sessions run their turns at once. Each store must show what a
// storage fault may never do: a half-written session, a call run twice, a
// result handed out and then lost; a restart recovers and the next turns
// work; and the faults are the same ones at the same operations for one
// seed whatever the scheduling (how sessions interleave, how many calls
// run at once), other ones for another seed. `serve` and `run` are tested
// the same way as processes on Badger in integration_test/chaos.

var chaosStoreSessions = []string{"ca", "cb", "cc"}

const chaosStoreTurns = 10

func storageChaosPolicy(seed uint64) *chaos.Policy {
	ms := func(n int) chaos.Duration { return chaos.Duration{Duration: time.Duration(n) * time.Millisecond} }
	return &chaos.Policy{Seed: seed, Storage: []chaos.StorageRule{
		{Ops: []string{"intent"}, Faults: []chaos.StorageFault{
			{Kind: chaos.StorageWriteError, Probability: 0.08},
			{Kind: chaos.StorageDiskFull, Probability: 0.08},
			{Kind: chaos.StorageSyncError, Probability: 0.08},
			{Kind: chaos.StorageStall, Probability: 0.08, Delay: ms(5)},
		}},
		{Ops: []string{"commit"}, Faults: []chaos.StorageFault{
			{Kind: chaos.StorageDiskFull, Probability: 0.1},
			{Kind: chaos.StorageWriteError, Probability: 0.1},
			{Kind: chaos.StorageSyncError, Probability: 0.1},
			{Kind: chaos.StorageSlowSync, Probability: 0.1, Min: ms(2), Max: ms(10)},
			{Kind: chaos.StorageStall, Probability: 0.1, Delay: ms(5)},
		}},
	}}
}

// storageChaosDecide is the decision chaos mode draws at the store's seam,
// as `run` and `serve` wire it.
func storageChaosDecide(p *chaos.Policy) faults.Decide {
	return func(op *seam.Op, attempt int) (faults.Fault, bool) {
		d := p.DecideStorage(chaos.StorageOp{Op: op.Kind.String(), Session: op.Session, Run: op.Run, Turn: op.Turn, Key: op.Key, Attempt: attempt})
		return faults.Fault{Kind: d.Kind, Delay: d.Delay}, d.Injected()
	}
}

// chaosTurn is turn i of session: note, echo, note (three segments, so
// three intents), with a turn id.
func chaosTurn(session string, i int) *messages.DispatchTurn {
	id := fmt.Sprintf("%s-t%d", session, i)
	tr := faultTurn(faultCall(id+"a", "note", `{"x":"`+id+`"}`), faultCall(id+"b", "echo", `{"x":"`+id+`"}`),
		faultCall(id+"c", "note", `{"x":"`+id+`c"}`))
	tr.Session, tr.TurnId = session, id
	return tr
}

// chaosOutcome is what Dispatch returned for one turn.
type chaosOutcome struct {
	session string
	res     *messages.TurnResult
	err     error
}

// dispatchChaosSessions dispatches turns first..last of every session: the
// sessions at once, each its turns in order, or with serial set one
// session after the other, in the order given.
func dispatchChaosSessions(n *faultNode, sessions []string, first, last int, serial bool) []chaosOutcome {
	var mu sync.Mutex
	var out []chaosOutcome
	var wg sync.WaitGroup
	for _, sess := range sessions {
		run := func() {
			for i := first; i <= last; i++ {
				r, err := n.dispatch(chaosTurn(sess, i))
				mu.Lock()
				out = append(out, chaosOutcome{sess, r, err})
				mu.Unlock()
			}
		}
		if serial {
			run()
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); run() }()
	}
	wg.Wait()
	return out
}

// injectedList is what the injector injected, one string a fault, sorted.
func injectedList(in *faults.Injector) []string {
	var out []string
	for _, j := range in.Injected() {
		out = append(out, fmt.Sprintf("%s %s %s %d %s %s %s", j.Op.Kind, j.Op.Session, j.Op.Run, j.Op.Turn, j.Op.Key, j.Fault.Kind, j.Fault.Delay))
	}
	slices.Sort(out)
	return out
}

// committedStatuses checks session's committed turns (numbered without
// gaps, one result per call) and returns the statuses by call id.
func committedStatuses(t *testing.T, s cachestore.History, session string) map[string]string {
	t.Helper()
	recs, err := s.Turns(context.Background(), session)
	if err != nil {
		t.Fatalf("reading session %s: %v", session, err)
	}
	out := map[string]string{}
	for i, rec := range recs {
		if rec.Turn != int64(i+1) {
			t.Errorf("INVARIANT: session %s: turn %d is numbered %d", session, i+1, rec.Turn)
		}
		calls := rec.Assistant.GetToolCalls()
		if len(rec.ToolMessages) != len(calls) {
			t.Errorf("INVARIANT: session %s turn %d: %d results for %d calls (half written)", session, rec.Turn, len(rec.ToolMessages), len(calls))
		}
		for j, m := range rec.ToolMessages {
			if j < len(calls) && m.ToolCallId != calls[j].Id {
				t.Errorf("INVARIANT: session %s turn %d: result %d is for %q, want %q", session, rec.Turn, j, m.ToolCallId, calls[j].Id)
			}
			if _, dup := out[m.ToolCallId]; dup {
				t.Errorf("INVARIANT: session %s: call %s has two results", session, m.ToolCallId)
			}
			out[m.ToolCallId] = m.Status
		}
	}
	return out
}

// checkChaosStore checks every session in the store against what the
// turns were answered: what was handed out is stored so, a note call ran
// at most once and reads ok only if it ran, error only if it did not;
// with all set, every call of turns 1..last has a result.
func checkChaosStore(t *testing.T, s cachestore.History, ran *ranLog, outcomes []chaosOutcome, last int, all bool) {
	t.Helper()
	stored := map[string]string{}
	for _, sess := range chaosStoreSessions {
		for id, st := range committedStatuses(t, s, sess) {
			stored[sess+"/"+id] = st
		}
	}
	counts := ran.all()
	for id, n := range counts {
		if n > 1 {
			t.Errorf("INVARIANT: call %s ran %d times", id, n)
		}
	}
	for id, st := range stored {
		if !strings.HasSuffix(id, "a") && !strings.HasSuffix(id, "c") {
			continue // echo: read-only, not counted
		}
		switch n := counts[id]; st {
		case "ok":
			if n != 1 {
				t.Errorf("INVARIANT: call %s reads ok and ran %d times", id, n)
			}
		case "error", "canceled":
			if n != 0 {
				t.Errorf("INVARIANT: call %s reads %s and ran", id, st)
			}
		case "outcome_unknown":
		default:
			t.Errorf("INVARIANT: call %s reads %q", id, st)
		}
	}
	for _, o := range outcomes {
		for _, m := range o.res.GetMessages() {
			if o.err == nil && stored[o.session+"/"+m.ToolCallId] != m.Status {
				t.Errorf("INVARIANT: %s/%s was answered %s, the store holds %q", o.session, m.ToolCallId, m.Status, stored[o.session+"/"+m.ToolCallId])
			}
		}
	}
	if all {
		for _, sess := range chaosStoreSessions {
			for i := 1; i <= last; i++ {
				for _, c := range chaosTurn(sess, i).Message.ToolCalls {
					if _, ok := stored[sess+"/"+c.Id]; !ok {
						t.Errorf("INVARIANT: call %s/%s has no result", sess, c.Id)
					}
				}
			}
		}
	}
}

// decisions records every decision of a session's operations, in order
// (a session's operations run one after the other).
type decisions struct {
	mu sync.Mutex
	by map[string][]decided
}

type decided struct {
	kind  seam.Kind
	turn  int64
	fault string // "" for none
}

// recording returns d recording each decision.
func (r *decisions) recording(d faults.Decide) faults.Decide {
	return func(op *seam.Op, attempt int) (faults.Fault, bool) {
		f, ok := d(op, attempt)
		r.mu.Lock()
		defer r.mu.Unlock()
		rec := decided{kind: op.Kind, turn: op.Turn}
		if ok {
			rec.fault = f.Kind
		}
		r.by[op.Session] = append(r.by[op.Session], rec)
		return f, ok
	}
}

// checkChaosAnswers checks each turn's answer against the faults of its
// operations (a session's turns each end with one commit): a turn failed
// exactly when its commit had a failing fault (a full disk's error
// matching cachestore.ErrNoSpace), and a call that reads "could not
// record" had a failing fault at an intent of its turn.
func checkChaosAnswers(t *testing.T, rec *decisions, outcomes []chaosOutcome) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, sess := range chaosStoreSessions {
		var mine []chaosOutcome
		for _, o := range outcomes {
			if o.session == sess {
				mine = append(mine, o)
			}
		}
		var turns [][]decided
		var cur []decided
		for _, d := range rec.by[sess] {
			cur = append(cur, d)
			if d.kind == seam.CommitTurn {
				turns, cur = append(turns, cur), nil
			}
		}
		if len(turns) != len(mine) || len(cur) != 0 {
			t.Errorf("session %s: %d commits (and %d operations after the last) for %d turns", sess, len(turns), len(cur), len(mine))
			continue
		}
		for i, o := range mine {
			ops := turns[i]
			commit := ops[len(ops)-1]
			if commit.fault == faults.SlowSync || commit.fault == faults.Stall {
				commit.fault = ""
			}
			intentFailed := slices.ContainsFunc(ops, func(d decided) bool {
				return d.kind == seam.WriteIntent && d.fault != "" && d.fault != faults.Stall
			})
			k := fmt.Sprintf("%s/%d", sess, commit.turn)
			switch {
			case o.err != nil && commit.fault == "":
				t.Errorf("turn %s failed with no storage fault at its commit: %v", k, o.err)
			case o.err != nil && (errors.Is(o.err, cachestore.ErrNoSpace) != (commit.fault == faults.DiskFull) ||
				!strings.Contains(o.err.Error(), "("+commit.fault+" injected)")):
				t.Errorf("turn %s: %s at its commit, and the turn's error is %v", k, commit.fault, o.err)
			case o.err == nil && commit.fault != "":
				t.Errorf("turn %s: %s at its commit, and the turn was answered %s", k, commit.fault, statusList(o.res))
			case o.err == nil && o.res.GetTurn() != commit.turn:
				t.Errorf("turn %s was answered as turn %d", k, o.res.GetTurn())
			}
			for _, m := range o.res.GetMessages() {
				if recorded := strings.Contains(m.Content, "could not record"); recorded && !intentFailed {
					t.Errorf("turn %s: %s reads %q with no fault at an intent", k, m.ToolCallId, m.Content)
				}
			}
			if o.err == nil && intentFailed && !strings.Contains(statusList(o.res), "=error") {
				t.Errorf("turn %s: an intent failed, and no call reads error: %s", k, statusList(o.res))
			}
		}
	}
}

// TestStorageChaos runs the chaos policy's storage faults on every store.
func TestStorageChaos(t *testing.T) {
	const seed = 20261207
	for _, st := range faultStores {
		t.Run(st.name, func(t *testing.T) {
			s, restart := st.open(t)
			ran := &ranLog{n: map[string]int{}}
			n := newFaultNode(t, s, ran, nil)
			rec := &decisions{by: map[string][]decided{}}
			n.inj.SetDecide(rec.recording(storageChaosDecide(storageChaosPolicy(seed))))
			outcomes := dispatchChaosSessions(n, chaosStoreSessions, 1, chaosStoreTurns, false)
			injected := injectedList(n.inj)
			kinds := map[string]int{}
			for _, j := range n.inj.Injected() {
				kinds[j.Op.Kind.String()+" "+j.Fault.Kind]++
			}
			if len(kinds) < 7 {
				t.Errorf("seed %d injected %v: too few kinds of fault to show anything", seed, kinds)
			}
			failed := 0
			for _, o := range outcomes {
				if o.err != nil {
					failed++
				}
			}
			checkChaosAnswers(t, rec, outcomes)
			checkChaosStore(t, n.store, ran, outcomes, chaosStoreTurns, false)
			n.close()

			// A restart without the faults: every turn sent again with its
			// turn id is answered (replayed or run), and the next one works.
			n = newFaultNode(t, restart(), ran, nil)
			again := dispatchChaosSessions(n, chaosStoreSessions, 1, chaosStoreTurns+1, false)
			for _, o := range again {
				if o.err != nil {
					t.Errorf("session %s once the faults are over: %v", o.session, o.err)
				}
			}
			checkChaosStore(t, n.store, ran, append(outcomes, again...), chaosStoreTurns+1, true)
			n.close()

			// The same seed, another scheduling: the same faults.
			replay := func(seed uint64, limit int) []string {
				s, _ := st.open(t)
				n := newFaultNode(t, s, &ranLog{n: map[string]int{}}, nil, func(c *actors.Config) { c.MaxConcurrency = limit })
				defer n.close()
				n.inj.SetDecide(storageChaosDecide(storageChaosPolicy(seed)))
				reversed := slices.Clone(chaosStoreSessions)
				slices.Reverse(reversed)
				dispatchChaosSessions(n, reversed, 1, chaosStoreTurns, true)
				return injectedList(n.inj)
			}
			if got := replay(seed, 1); !slices.Equal(injected, got) {
				t.Errorf("seed %d in another scheduling injected other faults:\nfirst:  %q\nreplay: %q", seed, injected, got)
			}
			if got := replay(seed+1, 3); slices.Equal(injected, got) {
				t.Errorf("seeds %d and %d injected the same %d faults", seed, seed+1, len(injected))
			}
			t.Logf("FIGURES %s: turns=%d failed=%d faults=%d kinds=%v", st.name, len(outcomes), failed, len(injected), kinds)
		})
	}
}
