// Command eino measures cloudwego/eino's ToolsNode on the no-op workload of
// `tooldispatch bench`: 100-call turns of a no-op tool, run in parallel by
// the ToolsNode. It reports two figures as JSON on stdout: eino as it is
// (no validation, no limit, nothing stored) and eino wrapped with the same
// work tooldispatch does per call and per turn (strict parse, canonical
// form and schema validation of each call's arguments, an intent record and
// one commit per turn in a Badger store), so the comparison is like for like.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// noopSchema is the no-op tool's parameter schema, the same as the one
// tooldispatch's workload validates against.
const noopSchema = `{"type":"object","properties":{"i":{"type":"integer"}},"required":["i"],"additionalProperties":false}`

// noop is an eino tool that does nothing; when validate is set it first
// parses and validates its arguments as tooldispatch's preflight does.
type noop struct {
	validate bool
	schemas  *toolkit.SchemaCache
}

func (t *noop) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: "noop", Desc: "Does nothing."}, nil
}

func (t *noop) InvokableRun(_ context.Context, args string, _ ...tool.Option) (string, error) {
	if t.validate {
		a, err := toolkit.ParseArgs(args, toolkit.Limits{})
		if err != nil {
			return "", err
		}
		s, err := t.schemas.Compile([]byte(noopSchema))
		if err != nil {
			return "", err
		}
		if err := s.Validate(a.Value); err != nil {
			return "", err
		}
		_ = toolkit.DedupKey("noop", a)
	}
	return "ok", nil
}

// result is what the command prints.
type result struct {
	Eino         string  `json:"eino"`
	Calls        int     `json:"calls_per_turn"`
	Rounds       int     `json:"rounds"`
	RawNsPerCall float64 `json:"raw_ns_per_call"`
	// WrappedNsPerCall: validation of every call, and an intent record and
	// one commit per turn in Badger on disk (no fsync).
	WrappedNsPerCall float64 `json:"wrapped_ns_per_call"`
	GoVersion        string  `json:"go_version"`
	Cores            int     `json:"cores"`
}

func main() {
	rounds := flag.Int("rounds", 5, "rounds; the median is reported")
	turns := flag.Int("turns", 200, "100-call turns per round")
	flag.Parse()
	if err := run(*rounds, *turns); err != nil {
		fmt.Fprintln(os.Stderr, "eino peer:", err)
		os.Exit(1)
	}
}

func run(rounds, turns int) error {
	ctx := context.Background()
	const calls = 100
	msg := func(turn int) *schema.Message {
		tcs := make([]schema.ToolCall, calls)
		for i := range tcs {
			tcs[i] = schema.ToolCall{ID: "c" + strconv.Itoa(i), Type: "function",
				Function: schema.FunctionCall{Name: "noop", Arguments: `{"i":` + strconv.Itoa(turn*calls+i) + `}`}}
		}
		return &schema.Message{Role: schema.Assistant, ToolCalls: tcs}
	}
	raw, err := compose.NewToolNode(ctx, &compose.ToolsNodeConfig{Tools: []tool.BaseTool{&noop{}}})
	if err != nil {
		return err
	}
	wrappedTool := &noop{validate: true, schemas: toolkit.NewSchemaCache()}
	wrapped, err := compose.NewToolNode(ctx, &compose.ToolsNodeConfig{Tools: []tool.BaseTool{wrappedTool}})
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "eino-peer-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := badger.Open(badger.TestOptions(dir))
	if err != nil {
		return err
	}
	defer store.Close()

	res := result{Eino: einoVersion(), Calls: calls, Rounds: rounds, GoVersion: runtime.Version(), Cores: runtime.NumCPU()}
	var rawT, wrapT []float64
	turn := int64(0)
	for r := 0; r < rounds; r++ {
		inputs := make([]*schema.Message, turns)
		for i := range inputs {
			inputs[i] = msg(r*turns + i)
		}
		start := time.Now()
		for _, in := range inputs {
			if _, err := raw.Invoke(ctx, in); err != nil {
				return err
			}
		}
		rawT = append(rawT, float64(time.Since(start).Nanoseconds())/float64(turns*calls))

		start = time.Now()
		for _, in := range inputs {
			turn++
			if err := wrappedTurn(ctx, wrapped, store, turn, in); err != nil {
				return err
			}
		}
		wrapT = append(wrapT, float64(time.Since(start).Nanoseconds())/float64(turns*calls))
	}
	res.RawNsPerCall, res.WrappedNsPerCall = median(rawT), median(wrapT)
	return json.NewEncoder(os.Stdout).Encode(res)
}

// wrappedTurn runs one turn through the ToolsNode between the same intent
// write and commit tooldispatch does.
func wrappedTurn(ctx context.Context, node *compose.ToolsNode, store cachestore.Store, turn int64, in *schema.Message) error {
	const session = "eino"
	asst := &messages.AssistantMessage{Role: "assistant"}
	names, ids := make([]string, len(in.ToolCalls)), make([]string, len(in.ToolCalls))
	started := make([]int, len(in.ToolCalls))
	for i, tc := range in.ToolCalls {
		asst.ToolCalls = append(asst.ToolCalls, &messages.ToolCall{Id: tc.ID, Type: "function",
			Function: &messages.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		names[i], ids[i], started[i] = tc.Function.Name, tc.ID, i
	}
	if err := store.WriteIntent(ctx, &cachestore.Intent{Session: session, Turn: turn, Run: "bench", Assistant: asst,
		Names: names, IDs: ids, Started: started, Decided: map[int]*messages.ToolMessage{}}); err != nil {
		return err
	}
	out, err := node.Invoke(ctx, in)
	if err != nil {
		return err
	}
	msgs := make([]*messages.ToolMessage, len(out))
	for i, m := range out {
		msgs[i] = &messages.ToolMessage{Role: "tool", ToolCallId: m.ToolCallID, Name: m.ToolName, Status: "ok", Content: m.Content}
	}
	return store.CommitTurn(ctx, &cachestore.TurnCommit{Session: session,
		Record: &messages.TurnRecord{Turn: turn, Run: "bench", Assistant: asst, ToolMessages: msgs, TimeUnixNano: time.Now().UnixNano()}})
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func einoVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/cloudwego/eino" {
				return d.Version
			}
		}
	}
	return "unknown"
}
