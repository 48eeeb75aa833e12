package chaos

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func storagePolicy(seed uint64) *Policy {
	return &Policy{Seed: seed, Storage: []StorageRule{
		{Ops: []string{"intent"}, Faults: []StorageFault{{Kind: StorageWriteError, Probability: 0.2}}},
		{Ops: []string{"commit", "end_run"}, Faults: []StorageFault{
			{Kind: StorageDiskFull, Probability: 0.1},
			{Kind: StorageSyncError, Probability: 0.1},
			{Kind: StorageSlowSync, Probability: 0.1, Min: Duration{time.Millisecond}, Max: Duration{20 * time.Millisecond}},
			{Kind: StorageStall, Probability: 0.1, Delay: Duration{50 * time.Millisecond}},
		}},
	}}
}

// TestStorageLoadTOML: a policy file's [[storage]] rules are read, and
// the operations they name get faults at the configured rates.
func TestStorageLoadTOML(t *testing.T) {
	f := filepath.Join(t.TempDir(), "p.toml")
	src := `seed = 5
[[storage]]
ops = ["commit"]
faults = [
  {kind = "disk_full", probability = 0.25},
  {kind = "slow_fsync", probability = 0.25, min = "1ms", max = "9ms"},
]
`
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasStorage() || len(p.Storage[0].Faults) != 2 || p.Storage[0].Faults[1].Max.Duration != 9*time.Millisecond {
		t.Fatalf("loaded %+v", p)
	}
	const n = 8000
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		d := p.DecideStorage(StorageOp{Op: "commit", Session: "s", Run: "r", Turn: int64(i + 1)})
		counts[d.Kind]++
		if d.Kind == StorageSlowSync && (d.Delay < time.Millisecond || d.Delay > 9*time.Millisecond) {
			t.Fatalf("slow_fsync delay %s outside [1ms, 9ms]", d.Delay)
		}
		if d := p.DecideStorage(StorageOp{Op: "intent", Session: "s", Turn: int64(i + 1)}); d.Injected() {
			t.Fatalf("an operation no rule names got %+v", d)
		}
	}
	for kind, prob := range map[string]float64{StorageDiskFull: 0.25, StorageSlowSync: 0.25, "": 0.5} {
		if got := float64(counts[kind]) / n; math.Abs(got-prob) > 0.025 {
			t.Errorf("%q: rate %.4f, want %.2f ± 0.025", kind, got, prob)
		}
	}
}

// TestStorageDecisionsAreKeyedOnTheOperation: a decision depends on the
// seed and the operation's own facts (kind, session, run, turn, key,
// attempt), never on what was decided before: the same operations in any
// order get the same faults, another seed others.
func TestStorageDecisionsAreKeyedOnTheOperation(t *testing.T) {
	p, q := storagePolicy(11), storagePolicy(12)
	var ops []StorageOp
	for s := 0; s < 4; s++ {
		for turn := int64(1); turn <= 30; turn++ {
			session := string(rune('a' + s))
			ops = append(ops, StorageOp{Op: "intent", Session: session, Run: "r", Turn: turn, Key: "c1"},
				StorageOp{Op: "commit", Session: session, Run: "r", Turn: turn},
				StorageOp{Op: "commit", Session: session, Run: "r", Turn: turn, Attempt: 1})
		}
	}
	forward := map[StorageOp]StorageDecision{}
	for _, op := range ops {
		forward[op] = p.DecideStorage(op)
	}
	injected, differ := 0, 0
	for i := len(ops) - 1; i >= 0; i-- {
		op := ops[i]
		d := p.DecideStorage(op)
		if d != forward[op] {
			t.Fatalf("%+v: %+v, then %+v in another order", op, forward[op], d)
		}
		if d.Injected() {
			injected++
		}
		if q.DecideStorage(op) != d {
			differ++
		}
	}
	if injected == 0 || injected == len(ops) {
		t.Fatalf("%d of %d operations got a fault; the policy should hit some", injected, len(ops))
	}
	if differ == 0 {
		t.Fatal("another seed gave the same decisions")
	}
	a := p.DecideStorage(StorageOp{Op: "commit", Session: "a", Run: "r", Turn: 1})
	for _, other := range []StorageOp{
		{Op: "commit", Session: "a", Run: "r", Turn: 1, Attempt: 1},
		{Op: "commit", Session: "b", Run: "r", Turn: 1},
		{Op: "commit", Session: "a", Run: "r2", Turn: 1},
		{Op: "commit", Session: "a", Run: "r", Turn: 2},
	} {
		// Over many seeds, each fact changes some decision.
		changed := false
		for seed := uint64(0); seed < 200 && !changed; seed++ {
			s := storagePolicy(seed)
			changed = s.DecideStorage(StorageOp{Op: "commit", Session: "a", Run: "r", Turn: 1}) != s.DecideStorage(other)
		}
		if !changed {
			t.Errorf("%+v is decided as %+v over 200 seeds: the fact that differs is not in the draw", other, a)
		}
	}
	// Ambiguous concatenations are different operations.
	changed := false
	for seed := uint64(0); seed < 200 && !changed; seed++ {
		s := storagePolicy(seed)
		changed = s.DecideStorage(StorageOp{Op: "commit", Session: "ab", Run: "c", Turn: 1}) != s.DecideStorage(StorageOp{Op: "commit", Session: "a", Run: "bc", Turn: 1})
	}
	if !changed {
		t.Error("session ab run c and session a run bc are drawn alike")
	}
}

// TestStorageDelaysAreBounded: a stall or a slow fsync always waits (never
// zero, which would hold the store until released) and never more than
// MaxStorageDelay.
func TestStorageDelaysAreBounded(t *testing.T) {
	p := &Policy{Seed: 3, Storage: []StorageRule{{Ops: []string{"commit"}, Faults: []StorageFault{
		{Kind: StorageStall, Probability: 0.5, Max: Duration{2 * time.Millisecond}},
		{Kind: StorageSlowSync, Probability: 0.5, Max: Duration{2 * time.Millisecond}},
	}}}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2000; i++ {
		d := p.DecideStorage(StorageOp{Op: "commit", Session: "s", Turn: int64(i)})
		if !d.Injected() || d.Delay <= 0 || d.Delay > 2*time.Millisecond {
			t.Fatalf("decision %+v: want a stall or slow fsync of (0, 2ms]", d)
		}
	}
}

func TestStorageValidateNamesTheBadField(t *testing.T) {
	rule := func(ops []string, f ...StorageFault) Policy {
		return Policy{Storage: []StorageRule{{Ops: ops, Faults: f}}}
	}
	commit := []string{"commit"}
	for _, c := range []struct {
		name string
		p    Policy
		want string
	}{
		{"no ops", rule(nil), "storage[0].ops: empty"},
		{"unknown op", rule([]string{"comit"}), `storage[0].ops: "comit" is not one of intent, commit`},
		{"a read", rule([]string{"load_session"}), `"load_session" is not one of`},
		{"bad kind", rule(commit, StorageFault{Kind: "melt", Probability: 0.1}), `storage[0].faults[0].kind "melt" is not one of disk_full, write_error, sync_error, slow_fsync, stall`},
		{"a tool fault kind", rule(commit, StorageFault{Kind: KindLatency, Probability: 0.1, Delay: Duration{time.Millisecond}}), `kind "latency" is not one of`},
		{"bad probability", rule(commit, StorageFault{Kind: StorageDiskFull, Probability: 1.5}), "storage[0].faults[0].probability"},
		{"too likely", rule(commit, StorageFault{Kind: StorageDiskFull, Probability: 0.6}, StorageFault{Kind: StorageWriteError, Probability: 0.6}), "storage[0]: probabilities add up to 1.200"},
		{"stall without delay", rule(commit, StorageFault{Kind: StorageStall, Probability: 0.1}), "storage[0].faults[0]: stall needs delay, or min <= max"},
		{"slow fsync min over max", rule(commit, StorageFault{Kind: StorageSlowSync, Probability: 0.1, Min: Duration{time.Second}, Max: Duration{time.Millisecond}}), "slow_fsync needs delay, or min <= max"},
		{"delay over the bound", rule(commit, StorageFault{Kind: StorageStall, Probability: 0.1, Delay: Duration{time.Hour}}), "storage[0].faults[0]: a delay of 1h0m0s is over the most, 30s"},
		{"max over the bound", rule(commit, StorageFault{Kind: StorageSlowSync, Probability: 0.1, Max: Duration{time.Minute}}), "over the most, 30s"},
		{"negative delay", rule(commit, StorageFault{Kind: StorageStall, Probability: 0.1, Delay: Duration{-time.Second}}), "storage[0].faults[0]: a delay cannot be negative"},
		{"delay on a write error", rule(commit, StorageFault{Kind: StorageWriteError, Probability: 0.1, Delay: Duration{time.Second}}), "storage[0].faults[0]: write_error takes no delay, min or max"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate() = %v, want it to say %q", err, c.want)
			}
		})
	}
}

// TestStorageReport: each fault gets the answer recorded after it for its
// session and turn (a later answer of a turn numbered alike is another
// turn's); faults of other sessions and runs are left out, faults about no
// session are kept.
func TestStorageReport(t *testing.T) {
	recs := []StorageRecord{
		{Op: "intent", Fault: StorageWriteError, Session: "s", Run: "r", Turn: 1, Key: "c1"},
		{Op: "commit", Fault: StorageSlowSync, Delay: "20ms", Session: "s", Run: "r", Turn: 1},
		{Op: "commit", Fault: StorageDiskFull, Session: "o", Run: "r", Turn: 1},
		{Answer: "200: c1=error", Session: "s", Turn: 1},
		{Op: "cache_put", Fault: StorageStall, Delay: "5ms", Key: "sha256:ab"},
		{Op: "commit", Fault: StorageDiskFull, Session: "s", Run: "r2", Turn: 2},
		{Answer: "507: the turn failed", Session: "o", Turn: 1},
		{Answer: "507: the turn failed: no space", Session: "s", Turn: 2},
		{Op: "commit", Fault: StorageWriteError, Session: "s", Run: "r2", Turn: 2},
		{Answer: "200: c9=ok", Session: "s", Turn: 1},
	}
	got := StorageReport(recs, "s", false, "")
	want := []string{"intent/s/1/200: c1=error", "commit/s/1/200: c1=error", "cache_put//0/", "commit/s/2/507: the turn failed: no space", "commit/s/2/"}
	if len(got) != len(want) {
		t.Fatalf("%d rows %+v, want %d", len(got), got, len(want))
	}
	for i, r := range got {
		if s := r.Op + "/" + r.Session + "/" + strconv.FormatInt(r.Turn, 10) + "/" + r.Client; s != want[i] {
			t.Errorf("row %d: %s, want %s", i, s, want[i])
		}
	}
	if got := StorageReport(recs, "s", true, "r2"); len(got) != 2 || got[0].Run != "r2" || got[1].Run != "r2" {
		t.Errorf("only run r2: %+v", got)
	}
}
