package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
)

const chaosUsage = `Usage:
  tooldispatch chaos plan   --chaos FILE [--run ID] [--first-turn N] [TURNS|-]
      print the faults the policy injects into the turns of TURNS (a run input),
      before running them: the same seed, run id and turn numbers inject the same
      faults whatever the scheduling
  tooldispatch chaos report [--session ID] [--run ID] [--json]
      list each injected fault of a persisted session and what the agent did on
      its next turn: retried, retried_other_args, switched_tool or gave_up
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

// plannedFault is one line of "chaos plan".
type plannedFault struct {
	Turn   int64  `json:"turn"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	Fault  string `json:"fault"`
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
	tr := newTurnReader(in, maxTurnBytes)
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
				return failf(exitInput, "%v", err)
			}
		}
		for i, c := range t.Message.GetToolCalls() {
			name := callToolName(c)
			if d := p.Decide(run, turn, i, name); d.Injected() {
				if err := writeJSONLine(e.stdout, plannedFault{Turn: turn, CallID: c.GetId(), Tool: name, Fault: d.Label()}); err != nil {
					return writeOut(err)
				}
			}
		}
		turn++
	}
}

// callToolName is the tool a call runs: the inner tool of run_tool, the
// name cut at a leaked special token.
func callToolName(c *messages.ToolCall) string {
	name := strings.TrimSpace(c.GetFunction().GetName())
	if i := strings.Index(name, "<|"); i >= 0 {
		name = strings.TrimSpace(name[:i])
	}
	if name != toolkit.RunToolName {
		return name
	}
	args, err := toolkit.ParseArgs(c.GetFunction().GetArguments(), toolkit.DefaultLimits)
	if err != nil {
		return name
	}
	inner := strings.TrimSpace(args.String("name"))
	if i := strings.Index(inner, "<|"); i >= 0 {
		inner = strings.TrimSpace(inner[:i])
	}
	return inner
}

// reportedFault is one line of "chaos report".
type reportedFault struct {
	Turn     int64  `json:"turn"`
	Run      string `json:"run"`
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"`
	Fault    string `json:"fault"`
	Status   string `json:"status"`
	Next     string `json:"next"`
	NextTurn int64  `json:"next_turn,omitempty"`
	Detail   string `json:"detail,omitempty"`
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
	rows := chaosRows(turns, o.runGiven, o.run)
	if o.json {
		for _, r := range rows {
			if err := writeJSONLine(e.stdout, r); err != nil {
				return writeOut(err)
			}
		}
		return nil
	}
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
		len(rows), counts["retried"], counts["retried_other_args"], counts["switched_tool"], counts["gave_up"])
	return writeOut(w.Flush())
}

func detailSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// chaosRows pairs each injected fault with what the agent did on the next
// turn of the same run.
func chaosRows(turns []*messages.TurnRecord, onlyRun bool, run string) []reportedFault {
	rows := []reportedFault{}
	for i, t := range turns {
		if onlyRun && t.Run != run {
			continue
		}
		var next *messages.TurnRecord
		for _, u := range turns[i+1:] {
			if u.Run == t.Run {
				next = u
				break
			}
		}
		for j, m := range t.ToolMessages {
			if m.Injected == "" {
				continue
			}
			var call *messages.ToolCall
			if calls := t.Assistant.GetToolCalls(); j < len(calls) {
				call = calls[j]
			}
			r := reportedFault{Turn: t.Turn, Run: t.Run, CallID: m.ToolCallId, Tool: m.Name, Fault: m.Injected, Status: m.Status}
			r.Next, r.Detail = nextMove(call, m.Name, next)
			if next != nil {
				r.NextTurn = next.Turn
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// nextMove classifies the agent's next turn after a fault on tool.
func nextMove(failed *messages.ToolCall, tool string, next *messages.TurnRecord) (string, string) {
	if next == nil || len(next.Assistant.GetToolCalls()) == 0 {
		return "gave_up", ""
	}
	want := canonicalCallArgs(failed)
	var others []string
	sameTool := false
	for _, c := range next.Assistant.GetToolCalls() {
		name := callToolName(c)
		if name != tool {
			others = append(others, name)
			continue
		}
		sameTool = true
		if want != "" && canonicalCallArgs(c) == want {
			return "retried", ""
		}
	}
	if sameTool {
		return "retried_other_args", ""
	}
	return "switched_tool", "to " + strings.Join(others, ", ")
}

// canonicalCallArgs is the canonical form of the arguments the call's tool
// gets (the inner ones for run_tool), or "".
func canonicalCallArgs(c *messages.ToolCall) string {
	if c == nil {
		return ""
	}
	args, err := toolkit.ParseArgs(c.GetFunction().GetArguments(), toolkit.DefaultLimits)
	if err != nil {
		return ""
	}
	if strings.TrimSpace(c.GetFunction().GetName()) == toolkit.RunToolName {
		switch v := args.Value["arguments"].(type) {
		case map[string]any:
			b, _ := toolkit.Canonicalize(v)
			return string(b)
		case string:
			inner, err := toolkit.ParseArgs(v, toolkit.DefaultLimits)
			if err != nil {
				return ""
			}
			return string(inner.Canonical)
		}
		return "{}"
	}
	return string(args.Canonical)
}
