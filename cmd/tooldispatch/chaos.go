package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"text/tabwriter"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
)

const chaosUsage = `Usage:
  tooldispatch chaos plan   --chaos FILE [--run ID] [--first-turn N] [TURNS|-]
      print the faults the policy injects into the turns of TURNS (a run input),
      before running them: the same seed, run id and turn numbers inject the same
      faults whatever the scheduling
  tooldispatch chaos report [--session ID] [--run ID] [--json]
      list each injected fault of a persisted session and what the agent did on
      its next turn: retried, retried_other_args, switched_tool or gave_up; then
      each injected storage fault (the policy's [[storage]] rules, decided at
      each store operation, so never in a plan) with its operation, session,
      turn and what the client of the turn was answered
`

// cmdChaos implements "tooldispatch chaos plan|report".
func (e *env) cmdChaos(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, chaosUsage)
		return &exitError{code: exitUsage}
	}
	switch args[0] {
	case "plan":
		return e.chaosPlan(args[1:])
	case "report":
		return e.chaosReport(args[1:])
	case "-h", "--help", "help":
		fmt.Fprint(e.stdout, chaosUsage)
		return nil
	}
	fmt.Fprintf(e.stderr, "tooldispatch chaos: unknown subcommand %q\n\n%s", args[0], chaosUsage)
	return &exitError{code: exitUsage}
}

func (e *env) chaosPlan(args []string) error {
	o, err := e.parseFlags("chaos-plan", args)
	if err != nil {
		return err
	}
	if o.chaos == "" {
		return failf(exitUsage, "chaos plan needs --chaos FILE")
	}
	policy, err := chaos.Load(o.chaos)
	if err != nil {
		return failf(exitUsage, "--chaos: %v", err)
	}
	var in io.Reader = e.stdin
	if len(o.args) == 1 && o.args[0] != "-" {
		f, err := os.Open(o.args[0])
		if err != nil {
			return failf(exitInput, "%v", err)
		}
		defer f.Close()
		in = f
	}
	// It dispatches nothing: turns of the default limit's size are read.
	tr := newTurnReader(in, actors.EncodedTurnLimit(actors.DefaultMaxTurnBytes))
	turn := o.firstTurn
	for {
		t, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return failf(exitInput, "%v", err)
		}
		run := o.run
		if t.Run != "" {
			run = t.Run
		}
		p := policy
		if t.Chaos != "" {
			if p, err = chaos.Parse(t.Chaos); err != nil {
				return failf(exitInput, "%v", &inputError{Turn: t.Index, Offset: t.Offset, Err: err})
			}
		}
		for _, f := range p.Plan(run, turn, t.Message.GetToolCalls()) {
			if err := writeJSONLine(e.stdout, f); err != nil {
				return writeOut(err)
			}
		}
		turn++
	}
}

func (e *env) chaosReport(args []string) error {
	o, err := e.parseFlags("chaos-report", args)
	if err != nil {
		return err
	}
	var turns []*messages.TurnRecord
	if _, err := os.Stat(o.data); err == nil {
		log := newLogger(e.stderr, o.logLevel)
		store, err := openStore(o.data, false, false, log)
		if err != nil {
			return failf(exitFailure, "opening the store in %s: %v", o.data, err)
		}
		turns, err = store.Turns(context.Background(), o.session)
		if cerr := store.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return failf(exitFailure, "reading session %q: %v", o.session, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return failf(exitFailure, "%v", err)
	}
	records, err := readStorageLog(o.data)
	if err != nil {
		return failf(exitFailure, "reading the storage-fault log: %v", err)
	}
	rows := chaos.Report(turns, o.runGiven, o.run)
	storage := chaos.StorageReport(records, o.session, o.runGiven, o.run)
	if o.json {
		for _, r := range rows {
			if err := writeJSONLine(e.stdout, r); err != nil {
				return writeOut(err)
			}
		}
		for _, r := range storage {
			if err := writeJSONLine(e.stdout, r); err != nil {
				return writeOut(err)
			}
		}
		return nil
	}
	return e.printChaosReport(rows, storage)
}

// printChaosReport prints the tool faults' table and, when there are any,
// the storage faults'.
func (e *env) printChaosReport(rows []chaos.ReportedFault, storage []chaos.ReportedStorageFault) error {
	w := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TURN\tCALL\tTOOL\tFAULT\tSTATUS\tNEXT TURN\tTHE AGENT")
	for _, r := range rows {
		next := "-"
		if r.NextTurn > 0 {
			next = fmt.Sprint(r.NextTurn)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Turn, r.CallID, r.Tool, r.Fault, r.Status, next, r.Next+detailSuffix(r.Detail))
	}
	counts := map[string]int{}
	for _, r := range rows {
		counts[r.Next]++
	}
	fmt.Fprintf(w, "\n%d injected faults: %d retried, %d retried with other arguments, %d switched tool, %d gave up\n",
		len(rows), counts[chaos.NextRetried], counts[chaos.NextRetriedOtherArgs], counts[chaos.NextSwitchedTool], counts[chaos.NextGaveUp])
	if len(storage) > 0 {
		fmt.Fprintln(w, "\nSTORAGE OP\tSESSION\tTURN\tKEY\tFAULT\tTHE CLIENT SAW")
		byKind := map[string]int{}
		for _, r := range storage {
			byKind[r.Fault]++
			fault := r.Fault
			if r.Delay != "" {
				fault += " " + r.Delay
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Op, orDash(r.Session), orDash(turnText(r.Turn)), orDash(r.Key), fault, orDash(r.Client))
		}
		fmt.Fprintf(w, "\n%d injected storage faults:", len(storage))
		for i, k := range chaos.StorageKinds {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(w, "%s %d %s", sep, byKind[k], k)
		}
		fmt.Fprintln(w)
	}
	return writeOut(w.Flush())
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func turnText(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}

func detailSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}
