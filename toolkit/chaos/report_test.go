package chaos

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tooldispatch/tooldispatch/messages"
)

func call(id, name, args string) *messages.ToolCall {
	return &messages.ToolCall{Id: id, Type: "function", Function: &messages.FunctionCall{Name: name, Arguments: args}}
}

func turn(n int64, run string, calls ...*messages.ToolCall) *messages.TurnRecord {
	return &messages.TurnRecord{Turn: n, Run: run, Assistant: &messages.AssistantMessage{Role: "assistant", ToolCalls: calls}}
}

func TestNextMove(t *testing.T) {
	readA := `{"name":"read_file","arguments":{"path":"a"}}`
	tests := []struct {
		name         string
		failed       *messages.ToolCall
		tool         string
		next         *messages.TurnRecord
		move, detail string
	}{
		{name: "no next turn", failed: call("c", "read_file", `{"path":"a"}`), tool: "read_file", move: NextGaveUp},
		{name: "no calls", failed: call("c", "read_file", `{"path":"a"}`), tool: "read_file", next: turn(2, "r"), move: NextGaveUp},
		{name: "same call, other spacing", failed: call("c", "read_file", `{"path":"a"}`), tool: "read_file",
			next: turn(2, "r", call("d", " read_file ", `{ "path": "a" }`)), move: NextRetried},
		{name: "other arguments", failed: call("c", "read_file", `{"path":"a"}`), tool: "read_file",
			next: turn(2, "r", call("d", "read_file", `{"path":"b"}`)), move: NextRetriedOtherArgs},
		{name: "other tool", failed: call("c", "read_file", `{"path":"a"}`), tool: "read_file",
			next: turn(2, "r", call("d", "list_files", `{}`), call("e", "run_tool", `{"name":"grep"}`)),
			move: NextSwitchedTool, detail: "to list_files, grep"},
		{name: "direct, then through run_tool", failed: call("c", "read_file", `{"path":"a"}`), tool: "read_file",
			next: turn(2, "r", call("d", "run_tool", readA)), move: NextRetried},
		{name: "run_tool with inner arguments as a string", failed: call("c", "run_tool", readA), tool: "read_file",
			next: turn(2, "r", call("d", "run_tool", `{"name":"read_file","arguments":"{\"path\":\"a\"}"}`)), move: NextRetried},
		// Pass 1 cuts the leaked token before it checks for run_tool, so
		// both calls run read_file with the same arguments.
		{name: "run_tool with a leaked token", failed: call("c", "run_tool<|channel|>", readA), tool: "read_file",
			next: turn(2, "r", call("d", "run_tool", readA)), move: NextRetried},
		{name: "leaked token on the retry", failed: call("c", "run_tool", readA), tool: "read_file",
			next: turn(2, "r", call("d", "run_tool <|end|>", readA)), move: NextRetried},
		{name: "failed call unknown", tool: "read_file",
			next: turn(2, "r", call("d", "read_file", `{"path":"a"}`)), move: NextRetriedOtherArgs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			move, detail := NextMove(tt.failed, tt.tool, tt.next)
			if move != tt.move || detail != tt.detail {
				t.Errorf("NextMove = (%q, %q), want (%q, %q)", move, detail, tt.move, tt.detail)
			}
		})
	}
}

func TestReportPairsFaultsWithTheNextTurnOfTheRun(t *testing.T) {
	t1 := turn(1, "a", call("c1", "read_file", `{"path":"x"}`), call("c2", "now", ``))
	t1.ToolMessages = []*messages.ToolMessage{
		{ToolCallId: "c1", Name: "read_file", Status: "error", Injected: "error"},
		{ToolCallId: "c2", Name: "now", Status: "ok"},
	}
	other := turn(2, "b", call("c3", "now", ``)) // another run in between
	other.ToolMessages = []*messages.ToolMessage{{ToolCallId: "c3", Name: "now", Status: "timeout", Injected: "timeout"}}
	t3 := turn(3, "a", call("c4", "read_file", `{"path":"x"}`))
	t3.ToolMessages = []*messages.ToolMessage{{ToolCallId: "c4", Name: "read_file", Status: "ok"}}
	turns := []*messages.TurnRecord{t1, other, t3}

	want := []ReportedFault{
		{Turn: 1, Run: "a", CallID: "c1", Tool: "read_file", Fault: "error", Status: "error", Next: NextRetried, NextTurn: 3},
		{Turn: 2, Run: "b", CallID: "c3", Tool: "now", Fault: "timeout", Status: "timeout", Next: NextGaveUp},
	}
	if diff := cmp.Diff(want, Report(turns, false, "")); diff != "" {
		t.Errorf("Report (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[1:], Report(turns, true, "b")); diff != "" {
		t.Errorf("Report of run b (-want +got):\n%s", diff)
	}
}

func TestPlanNamesTheInnerTool(t *testing.T) {
	p := &Policy{Seed: 1, Rules: []Rule{{Tools: []string{"read_file"}, Faults: []Fault{{Kind: KindError, Probability: 1}}}}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	got := p.Plan("r", 4, []*messages.ToolCall{
		call("c1", "run_tool<|x|>", `{"name":"read_file","arguments":{}}`),
		call("c2", "now", ``),
		call("c3", "read_file<|end|>", `{}`),
	})
	want := []PlannedFault{{Turn: 4, CallID: "c1", Tool: "read_file", Fault: "error"}, {Turn: 4, CallID: "c3", Tool: "read_file", Fault: "error"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Plan (-want +got):\n%s", diff)
	}
}
