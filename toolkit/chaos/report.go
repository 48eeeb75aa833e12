package chaos

import (
	"strings"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// What the agent did on its next turn after an injected fault.
const (
	NextRetried          = "retried"            // called the same tool with the same arguments
	NextRetriedOtherArgs = "retried_other_args" // called the same tool with other arguments
	NextSwitchedTool     = "switched_tool"      // called other tools only
	NextGaveUp           = "gave_up"            // called no tool, or the run has no next turn
)

// PlannedFault is a fault a policy injects into one call of a turn, known
// before the turn runs.
type PlannedFault struct {
	Turn   int64  `json:"turn"`
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	Fault  string `json:"fault"`
}

// Plan lists the faults p injects into calls, the tool calls of turn number
// turn of run, in call order. Each call is read as pass 1 reads it
// (toolkit.ResolveCall), so the tool is run_tool's inner tool. A call that
// pass 1 answers before running (an unknown tool, a schema handshake, a
// refused confirmation) may be listed though nothing is injected into it.
func (p *Policy) Plan(run string, turn int64, calls []*messages.ToolCall) []PlannedFault {
	var out []PlannedFault
	for i, c := range calls {
		name := callTool(c).Name
		if d := p.Decide(run, turn, i, name); d.Injected() {
			out = append(out, PlannedFault{Turn: turn, CallID: c.GetId(), Tool: name, Fault: d.Label()})
		}
	}
	return out
}

// ReportedFault is an injected fault of a persisted session and what the
// agent did on its next turn of the same run.
type ReportedFault struct {
	Turn     int64  `json:"turn"`
	Run      string `json:"run"`
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"`
	Fault    string `json:"fault"`
	Status   string `json:"status"`
	Next     string `json:"next"` // one of the Next constants
	NextTurn int64  `json:"next_turn,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// Report pairs each injected fault of turns, a session's turns in order,
// with what the agent did on the next turn of the same run. With onlyRun
// set, only the turns of run are reported.
func Report(turns []*messages.TurnRecord, onlyRun bool, run string) []ReportedFault {
	rows := []ReportedFault{}
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
			r := ReportedFault{Turn: t.Turn, Run: t.Run, CallID: m.ToolCallId, Tool: m.Name, Fault: m.Injected, Status: m.Status}
			r.Next, r.Detail = NextMove(call, m.Name, next)
			if next != nil {
				r.NextTurn = next.Turn
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// NextMove classifies what the agent did in next after failed, a call of
// tool that got a fault: one of the Next constants, and for
// NextSwitchedTool the tools it called instead. Calls are compared as pass 1
// reads them: the tool is run_tool's inner tool, and arguments are compared
// in canonical form. next is nil when the run has no later turn.
func NextMove(failed *messages.ToolCall, tool string, next *messages.TurnRecord) (move, detail string) {
	if next == nil || len(next.Assistant.GetToolCalls()) == 0 {
		return NextGaveUp, ""
	}
	want := canonicalArgs(failed)
	var others []string
	sameTool := false
	for _, c := range next.Assistant.GetToolCalls() {
		name := callTool(c).Name
		if name != tool {
			others = append(others, name)
			continue
		}
		sameTool = true
		if want != "" && canonicalArgs(c) == want {
			return NextRetried, ""
		}
	}
	if sameTool {
		return NextRetriedOtherArgs, ""
	}
	return NextSwitchedTool, "to " + strings.Join(others, ", ")
}

// callTool reads c as pass 1 does. A refused call keeps its normalised
// name and has no arguments.
func callTool(c *messages.ToolCall) toolkit.ResolvedCall {
	rc, _ := toolkit.ResolveCall(c.GetFunction().GetName(), c.GetFunction().GetArguments(), toolkit.DefaultLimits)
	return rc
}

// canonicalArgs is the canonical form of the arguments c's tool gets, or
// "" when c is nil or its arguments are refused.
func canonicalArgs(c *messages.ToolCall) string {
	if c == nil {
		return ""
	}
	rc, err := toolkit.ResolveCall(c.GetFunction().GetName(), c.GetFunction().GetArguments(), toolkit.DefaultLimits)
	if err != nil {
		return ""
	}
	return string(rc.Args.Canonical)
}
