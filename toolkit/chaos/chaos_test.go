package chaos

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRatesMatchProbabilities(t *testing.T) {
	p := &Policy{Seed: 42, Rules: []Rule{{Tools: []string{"*"}, Faults: []Fault{
		{Kind: KindError, Probability: 0.10},
		{Kind: KindTimeout, Probability: 0.05},
		{Kind: KindHTTP, Status: 503, Probability: 0.20},
		{Kind: KindLatency, Probability: 0.15, Min: Duration{time.Millisecond}, Max: Duration{9 * time.Millisecond}},
	}}}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	const n = 10000
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		d := p.Decide("run-a", int64(1+i/100), i%100, "fetch_page")
		counts[d.Label()]++
		if d.Fault != nil && d.Fault.Kind == KindLatency && (d.Latency < time.Millisecond || d.Latency > 9*time.Millisecond) {
			t.Fatalf("latency %s outside [1ms, 9ms]", d.Latency)
		}
	}
	want := map[string]float64{"error": 0.10, "timeout": 0.05, "http_503": 0.20, "latency": 0.15, "": 0.50}
	for label, prob := range want {
		got := float64(counts[label]) / n
		if math.Abs(got-prob) > 0.02 {
			t.Errorf("%q: rate %.4f, want %.2f ± 0.02", label, got, prob)
		}
		t.Logf("%-8q configured %.2f measured %.4f", label, prob, got)
	}
}

func TestDecisionsAreDeterministicAndSeeded(t *testing.T) {
	p := &Policy{Seed: 7, Rules: []Rule{{Tools: []string{"mcp__*"}, Faults: []Fault{{Kind: KindError, Probability: 0.5}}}}}
	q := &Policy{Seed: 8, Rules: p.Rules}
	same, differ := 0, 0
	for i := 0; i < 200; i++ {
		a := p.Decide("r", 3, i, "mcp__fs__read")
		b := p.Decide("r", 3, i, "mcp__fs__read")
		if a.Label() != b.Label() {
			t.Fatal("same inputs, different decisions")
		}
		if a.Label() == q.Decide("r", 3, i, "mcp__fs__read").Label() {
			same++
		} else {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("another seed gave the same 200 decisions")
	}
	if d := p.Decide("r", 3, 0, "fetch_page"); d.Injected() {
		t.Fatal("a tool no rule matches got a fault")
	}
}

func TestValidateNamesTheBadField(t *testing.T) {
	cases := []struct {
		name string
		p    Policy
		want string
	}{
		{"no tools", Policy{Rules: []Rule{{}}}, "rules[0].tools"},
		{"bad kind", Policy{Rules: []Rule{{Tools: []string{"*"}, Faults: []Fault{{Kind: "explode"}}}}}, "rules[0].faults[0].kind"},
		{"too likely", Policy{Rules: []Rule{{Tools: []string{"*"}, Faults: []Fault{{Kind: KindError, Probability: 0.7}, {Kind: KindEmpty, Probability: 0.7}}}}}, "add up"},
		{"bad status", Policy{Rules: []Rule{{Tools: []string{"*"}, Faults: []Fault{{Kind: KindHTTP, Status: 404, Probability: 0.1}}}}}, "status"},
		{"bad glob", Policy{Rules: []Rule{{Tools: []string{"["}}}}, "bad glob"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate() = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

func TestAlter(t *testing.T) {
	out := strings.Repeat("hello world ", 20)
	trunc := (Decision{Fault: &Fault{Kind: KindTruncate, Fraction: 0.25}}).Alter(out)
	if len(trunc) != len(out)/4 || !strings.HasPrefix(out, trunc) {
		t.Errorf("truncate kept %d of %d bytes", len(trunc), len(out))
	}
	if (Decision{Fault: &Fault{Kind: KindEmpty}}).Alter(out) != "" {
		t.Error("empty left output")
	}
	g := Decision{Fault: &Fault{Kind: KindGarble}, roll: 12345}
	garbled := g.Alter(out)
	if garbled == out || len(garbled) != len(out) || g.Alter(out) != garbled {
		t.Error("garble must change the output, keep its length and be repeatable")
	}
}

func TestLoadTOML(t *testing.T) {
	f := filepath.Join(t.TempDir(), "p.toml")
	src := `seed = 99
[[rules]]
tools = ["fetch_page", "mcp__*"]
faults = [
  {kind = "http", status = 429, probability = 0.2},
  {kind = "latency", min = "10ms", max = "50ms", probability = 0.3},
]
`
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if p.Seed != 99 || len(p.Rules) != 1 || p.Rules[0].Faults[1].Max.Duration != 50*time.Millisecond {
		t.Fatalf("loaded %+v", p)
	}
}

// TestUnknownKeysAreRefused: a key of a policy file or of a turn's policy
// that would do nothing is refused, naming it (SPEC §16: every key has its
// effect or is refused).
func TestUnknownKeysAreRefused(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ file, src, want string }{
		{"typo.toml", "seed = 1\n[[rule]]\ntools = [\"*\"]\n", "rule"},
		{"fault.toml", "seed = 1\n[[rules]]\ntools = [\"*\"]\nfaults = [{kind = \"error\", probability = 0.1, chance = 0.5}]\n", "chance"},
		{"typo.json", `{"seed":1,"rulez":[]}`, "rulez"},
	} {
		f := filepath.Join(dir, c.file)
		if err := os.WriteFile(f, []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(f); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%s) = %v, want an error naming %q", c.file, err, c.want)
		}
	}
	if _, err := Parse(`{"seed":1,"rulez":[]}`); err == nil || !strings.Contains(err.Error(), "rulez") {
		t.Errorf("Parse of a turn's policy with an unknown key = %v, want an error naming it", err)
	}
}

// TestTurnPolicyCannotInjectStorageFaults: storage faults are the
// operator's (a policy file or [chaos]); a turn's policy that asks for
// them is refused, saying so, rather than taken with the storage part
// ignored.
func TestTurnPolicyCannotInjectStorageFaults(t *testing.T) {
	_, err := Parse(`{"seed":1,"storage":[{"ops":["commit"],"faults":[{"kind":"disk_full","probability":1}]}]}`)
	if err == nil || !strings.Contains(err.Error(), "operator") {
		t.Fatalf("Parse of a turn's policy with storage faults = %v, want a refusal saying they are the operator's", err)
	}
}
