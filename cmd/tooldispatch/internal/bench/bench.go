package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Systems compared.
const (
	SysBadger = "a tooldispatch+badger"
	SysMemory = "b tooldispatch+memory"
	SysBare   = "c bare+badger"
	SysEino   = "d eino (raw)"
	SysEinoW  = "d eino+validation+commit"
	SysShared = "toolkit (a, b, c)"
)

// Options select what runs.
type Options struct {
	// Quick runs fewer rounds and smaller workloads (CI smoke use).
	Quick bool
	// Rounds is how many times each workload runs; the median is
	// reported. Zero: 5 (2 with Quick).
	Rounds int
	// PeersDir is the directory of the peers module
	// (integration_test/peers). Empty: looked up from the working
	// directory upwards.
	PeersDir string
	// NoPeers skips eino.
	NoPeers bool
	// TauBench is τ-bench's expected-calls.json. Empty: looked up as
	// ../shared/testdata/tau-bench/expected-calls.json from the working
	// directory upwards; without it a built-in schema of the same shape is used.
	TauBench string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// ServiceOnly runs only the service load (`tooldispatch bench --service`).
	ServiceOnly bool
	// NoService skips the service load.
	NoService bool
	// TauServer is the command of the MCP workload's server. Empty: the
	// taumcp-server command built with "go build" from the module the
	// working directory is in.
	TauServer []string
	// TauServerEnv is added to TauServer's environment.
	TauServerEnv map[string]string
}

// Machine describes where the run happened.
type Machine struct {
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPU        string `json:"cpu,omitempty"`
}

// Row is one workload on one system.
type Row struct {
	Workload string  `json:"workload"`
	System   string  `json:"system"`
	Unit     string  `json:"unit"`
	Median   float64 `json:"median"`
	// Ratio is Median divided by system (a)'s median of the same workload;
	// zero when (a) did not run it.
	Ratio  float64   `json:"ratio_to_a,omitempty"`
	Rounds []float64 `json:"rounds"`
	// AllocsPerCall and AllocsPerTurn are heap allocations (MemStats.Mallocs
	// deltas over the whole process, background goroutines included) per
	// call and per turn, medians over the rounds; zero when not measured.
	AllocsPerCall float64 `json:"allocs_per_call,omitempty"`
	AllocsPerTurn float64 `json:"allocs_per_turn,omitempty"`
	Note          string  `json:"note,omitempty"`
}

// Target is one goal of the issue with what was measured.
type Target struct {
	Name     string  `json:"name"`
	Goal     string  `json:"goal"`
	Measured string  `json:"measured"`
	Ratio    float64 `json:"ratio"` // measured / goal bound (≤ 1 meets an upper bound, ≥ 1 a lower one)
	Met      bool    `json:"met"`
}

// Report is the outcome of Run.
type Report struct {
	Machine  Machine  `json:"machine"`
	Quick    bool     `json:"quick"`
	Rows     []Row    `json:"rows"`
	Targets  []Target `json:"targets"`
	Notes    []string `json:"notes,omitempty"`
	Seconds  float64  `json:"seconds"`
	Started  string   `json:"started"`
	rowIndex map[string]int
}

func (r *Report) add(row Row) {
	if r.rowIndex == nil {
		r.rowIndex = map[string]int{}
	}
	row.Median = median(row.Rounds)
	r.rowIndex[row.Workload+"\x00"+row.System] = len(r.Rows)
	r.Rows = append(r.Rows, row)
}

// Find returns the row of a workload and system.
func (r *Report) Find(workload, system string) (Row, bool) {
	i, ok := r.rowIndex[workload+"\x00"+system]
	if !ok {
		return Row{}, false
	}
	return r.Rows[i], true
}

func (r *Report) ratios() {
	for i := range r.Rows {
		a, ok := r.Find(r.Rows[i].Workload, SysBadger)
		if ok && a.Median != 0 {
			r.Rows[i].Ratio = r.Rows[i].Median / a.Median
		}
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Run runs every workload and returns the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Rounds <= 0 {
		o.Rounds = 5
		if o.Quick {
			o.Rounds = 2
		}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	start := time.Now()
	rep := &Report{Machine: machine(), Quick: o.Quick, Started: start.UTC().Format(time.RFC3339)}
	r := &runner{o: o, rep: rep}
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"no-op turns", r.noop},
		{"one-call turns", r.oneCall},
		{"4-call turns", r.fourCall},
		{"preflight", r.preflight},
		{"makespan", r.makespan},
		{"mixed turns", r.mixed},
		{"cached fetch_page", r.fetchPage},
		{"64 sessions", r.sessions},
		{"many sessions", r.manySessions},
		{"4 096-call turns", r.bigTurn},
		{"late turns", r.lateTurns},
		{"idle sessions", r.idle},
		{"pending approvals", r.pending},
		{"MCP τ-bench airline", r.tau},
		{"service", r.service},
		{"eino", r.eino},
	}
	for i := 0; i < len(steps); i++ {
		if (o.ServiceOnly && steps[i].name != "service") || (o.NoService && steps[i].name == "service") {
			steps = append(steps[:i], steps[i+1:]...)
			i--
		}
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fmt.Fprintf(o.Log, "bench: %s…\n", s.name)
		t0 := time.Now()
		if err := s.fn(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Fprintf(o.Log, "bench: %s done in %.1fs\n", s.name, time.Since(t0).Seconds())
	}
	rep.ratios()
	rep.Targets = targets(rep)
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as text tables.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "machine: %d cores (GOMAXPROCS %d), %s %s/%s, %s\n", r.Machine.Cores, r.Machine.GOMAXPROCS,
		r.Machine.GoVersion, r.Machine.OS, r.Machine.Arch, r.Machine.CPU)
	mode := "full"
	if r.Quick {
		mode = "quick"
	}
	fmt.Fprintf(w, "run: %s, %.0f s, medians over rounds; ratio = median / (a)'s median\n\n", mode, r.Seconds)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tsystem\tmedian\tunit\tratio to (a)\tallocs/call\tallocs/turn\tnote")
	for _, row := range r.Rows {
		ratio := "-"
		if row.Ratio != 0 {
			ratio = fmt.Sprintf("%.2f", row.Ratio)
		}
		apc, apt := "-", "-"
		if row.AllocsPerCall != 0 {
			apc = num(row.AllocsPerCall)
		}
		if row.AllocsPerTurn != 0 {
			apt = num(row.AllocsPerTurn)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Workload, row.System, num(row.Median), row.Unit, ratio, apc, apt, row.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tgoal\tmeasured\tratio\tmet")
	for _, t := range r.Targets {
		met := "yes"
		if !t.Met {
			met = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\n", t.Name, t.Goal, t.Measured, t.Ratio, met)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}

func num(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}
