package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/cmd/tooldispatch/internal/bench/taumcp"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	tdmcp "github.com/tooldispatch/tooldispatch/toolkit/mcp"
)

// tauServerName is the MCP server's name in tooldispatch's configuration:
// its tools are mcp__airline__<tool>.
const tauServerName = "airline"

// errTauResult: a call of the MCP workload did not come back as the
// server's answer.
var errTauResult = errors.New("bench: MCP call without the server's answer")

// TauTiming is one pass of the MCP workload on one side.
type TauTiming struct {
	// Total is the wall time from starting the server to its exit.
	Total time.Duration
	// Connect is the part spent starting the server: its process, the
	// initialize handshake and the listing of its tools.
	Connect time.Duration
	// Calls is how many calls were made.
	Calls int
	// Mallocs is the heap allocations of this process over the pass.
	Mallocs uint64
	// CPU is the processor time (user and system) this process spent
	// over the pass, the server's not included: less noisy than the wall
	// time on a shared machine.
	CPU time.Duration
}

// cpuTime is the processor time this process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TauOptions describe one pass.
type TauOptions struct {
	// Workload is the calls and tools.
	Workload *taumcp.Workload
	// Command runs the stdio MCP server answering Workload's tools.
	Command []string
	// Env is added to the server's environment.
	Env map[string]string
	// Passes repeats the calls, each pass on sessions of its own.
	Passes int
}

func (o TauOptions) passes() int { return max(o.Passes, 1) }

// TauTooldispatch makes the workload's calls through tooldispatch: the MCP
// manager starts the server and registers its tools, and every call is a
// turn of its own dispatched in the recorded order on its τ-bench task's
// session, under approval "all" (the tools of an untrusted server need
// approval), parsed and validated against the tool's schema, committed
// to Badger on disk (no fsync, as `tooldispatch run` opens it). Every
// call runs (NoDedup), so both sides make the same calls.
func TauTooldispatch(ctx context.Context, o TauOptions) (TauTiming, error) {
	dir, err := os.MkdirTemp("", "tooldispatch-bench-tau-*")
	if err != nil {
		return TauTiming{}, err
	}
	defer os.RemoveAll(dir)
	store, err := badger.Open(badger.Options{Dir: dir, Small: true, Logger: zerolog.Nop()})
	if err != nil {
		return TauTiming{}, err
	}
	defer store.Close()
	turns, err := tauTurns(o)
	if err != nil {
		return TauTiming{}, err
	}

	m0, c0 := mallocs(), cpuTime()
	t0 := time.Now()
	reg := toolkit.NewRegistry()
	m := tdmcp.NewManager(reg, []tdmcp.ServerConfig{{Name: tauServerName, Command: o.Command, Env: o.Env, NoDedup: true}}, zerolog.Nop())
	if err := m.Start(ctx); err != nil {
		return TauTiming{}, err
	}
	connected := time.Since(t0)
	d, err := actors.New(actors.Config{Registry: reg, Store: store})
	if err != nil {
		_ = m.Close()
		return TauTiming{}, err
	}
	var callErr error
	for _, t := range turns {
		res, err := d.Dispatch(ctx, t)
		if err == nil {
			err = tauCheck(res)
		}
		if err != nil {
			callErr = err
			break
		}
	}
	closeErr := d.Close(ctx)
	mErr := m.Close()
	total := time.Since(t0)
	allocs, cpu := mallocs()-m0, cpuTime()-c0
	if err := errors.Join(callErr, closeErr, mErr); err != nil {
		return TauTiming{}, err
	}
	return TauTiming{Total: total, Connect: connected, Calls: len(turns), Mallocs: allocs, CPU: cpu}, nil
}

// tauTurns builds the turns of every pass before the clock starts.
func tauTurns(o TauOptions) ([]*messages.DispatchTurn, error) {
	turns := make([]*messages.DispatchTurn, 0, o.passes()*len(o.Workload.Calls))
	for p := range o.passes() {
		for i, c := range o.Workload.Calls {
			name, err := tdmcp.ToolName(tauServerName, c.Name)
			if err != nil {
				return nil, err
			}
			call := &messages.ToolCall{Id: "call_" + strconv.Itoa(i), Type: "function",
				Function: &messages.FunctionCall{Name: name, Arguments: c.Arguments}}
			turns = append(turns, &messages.DispatchTurn{Session: "tau-" + strconv.Itoa(p) + "-" + c.Session, Run: "tau-" + strconv.Itoa(p),
				Provider: toolkit.ArrayAll, Approve: actors.ApproveAll, AutoLoadSchemas: true,
				Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: []*messages.ToolCall{call}}})
		}
	}
	return turns, nil
}

func tauCheck(res *messages.TurnResult) error {
	if res.GetError() != "" {
		return fmt.Errorf("%w: turn failed: %s", errTauResult, res.GetError())
	}
	if len(res.GetMessages()) != 1 || res.GetMessages()[0].GetStatus() != "ok" || !strings.HasPrefix(res.GetMessages()[0].GetContent(), `{"tool":`) {
		return fmt.Errorf("%w: %v", errTauResult, res.GetMessages())
	}
	return nil
}

// TauBare makes the same calls in the same order with a bare go-sdk client:
// it starts the server, lists its tools (as any client must to offer them
// to a model), calls each tool and closes the session.
func TauBare(ctx context.Context, o TauOptions) (TauTiming, error) {
	args := make([]json.RawMessage, len(o.Workload.Calls))
	for i, c := range o.Workload.Calls {
		args[i] = json.RawMessage(c.Arguments)
	}
	m0, c0 := mallocs(), cpuTime()
	t0 := time.Now()
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	// The environment tooldispatch gives a stdio server: PATH, HOME and
	// LANG, and what the options add.
	for _, k := range []string{"PATH", "HOME", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for k, v := range o.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return TauTiming{}, err
	}
	for _, err := range cs.Tools(ctx, nil) {
		if err != nil {
			_ = cs.Close()
			return TauTiming{}, err
		}
	}
	connected := time.Since(t0)
	n := 0
	var callErr error
	for range o.passes() {
		for i, c := range o.Workload.Calls {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.Name, Arguments: args[i]})
			if err == nil && (res.IsError || len(res.Content) != 1) {
				err = fmt.Errorf("%w: %s", errTauResult, c.Name)
			}
			if err != nil {
				callErr = err
				break
			}
			n++
		}
	}
	closeErr := cs.Close()
	total := time.Since(t0)
	allocs, cpu := mallocs()-m0, cpuTime()-c0
	if err := errors.Join(callErr, closeErr); err != nil {
		return TauTiming{}, err
	}
	return TauTiming{Total: total, Connect: connected, Calls: n, Mallocs: allocs, CPU: cpu}, nil
}

// tauFile is τ-bench's expected-calls.json: path, or found from the
// working directory upwards.
func tauFile(path string) string {
	if path != "" {
		return path
	}
	return findUp(filepath.Join("..", "shared", "testdata", "tau-bench", "expected-calls.json"))
}

// buildTauServer builds the taumcp-server command from the module the
// working directory is in, into dir, and returns its path.
func buildTauServer(ctx context.Context, dir string) (string, error) {
	mod := findUp("go.mod")
	if mod == "" {
		return "", errors.New("no go.mod above the working directory")
	}
	text, err := os.ReadFile(mod)
	if err != nil || !strings.HasPrefix(string(text), "module github.com/tooldispatch/tooldispatch\n") {
		return "", fmt.Errorf("%s is not tooldispatch's module", mod)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("no go command on PATH")
	}
	bin := filepath.Join(dir, "taumcp-server")
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "./cmd/tooldispatch/internal/bench/taumcp/taumcp-server")
	cmd.Dir = filepath.Dir(mod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return bin, nil
}

// Rows of the MCP workload.
const (
	// SysBareMCP is the bare go-sdk client of the MCP workload.
	SysBareMCP = "bare go-sdk client"
	wTau       = "τ-bench airline calls over stdio MCP, wall time"
	wTauConn   = "τ-bench airline over MCP: starting the server (in the wall time)"
	wTauCPU    = "τ-bench airline over MCP: CPU time of the client process"
	wTauRatio  = "τ-bench airline over MCP: tooldispatch / bare, wall time, paired"
)

// tau runs the MCP workload: per round one pass through tooldispatch and
// one with the bare client, alternating which goes first so that a
// warmer machine favours neither.
func (r *runner) tau(ctx context.Context) error {
	path := tauFile(r.o.TauBench)
	if path == "" {
		r.rep.Notes = append(r.rep.Notes, "MCP workload: not measured (τ-bench's expected-calls.json not found; pass --tau-bench FILE)")
		return nil
	}
	w, err := taumcp.Load(path)
	if err != nil {
		return err
	}
	command := r.o.TauServer
	if len(command) == 0 {
		dir, err := os.MkdirTemp("", "tooldispatch-bench-taumcp-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin, err := buildTauServer(ctx, dir)
		if err != nil {
			r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("MCP workload: not measured (building its server: %v)", err))
			return nil
		}
		command = []string{bin, "-calls", path}
	}
	o := TauOptions{Workload: w, Command: command, Env: r.o.TauServerEnv, Passes: r.pick(7, 1)}
	calls := o.passes() * len(w.Calls)
	note := fmt.Sprintf("%d calls in %d sessions, one call per turn", calls, o.passes()*w.Sessions())
	td := Row{Workload: wTau, System: SysBadger, Unit: "ms", Note: note + "; approve all, NoDedup"}
	bare := Row{Workload: wTau, System: SysBareMCP, Unit: "ms", Note: note}
	tdConn := Row{Workload: wTauConn, System: SysBadger, Unit: "ms"}
	bareConn := Row{Workload: wTauConn, System: SysBareMCP, Unit: "ms"}
	tdCPU := Row{Workload: wTauCPU, System: SysBadger, Unit: "ms", Note: "user + system, the server's not included"}
	bareCPU := Row{Workload: wTauCPU, System: SysBareMCP, Unit: "ms"}
	ratio := Row{Workload: wTauRatio, System: SysBadger, Unit: "ratio",
		Note: "median of each round's ratio: the two sides of a round run back to back, alternating which goes first, so a change of the machine's load hits both"}
	var perCall []float64
	// A pass of each first, not counted: the server binary and the
	// page cache warm.
	if _, err := TauBare(ctx, o); err != nil {
		return err
	}
	// side runs one pass of run and adds its figures to the rows of total,
	// connect and cpu; the last pass's timing stays in last.
	side := func(run func(context.Context, TauOptions) (TauTiming, error), total, connect, cpu *Row, last *TauTiming) func() error {
		return func() error {
			runtime.GC()
			t, err := run(ctx, o)
			if err == nil {
				total.Rounds = append(total.Rounds, ms(t.Total))
				connect.Rounds = append(connect.Rounds, ms(t.Connect))
				cpu.Rounds = append(cpu.Rounds, ms(t.CPU))
				*last = t
			}
			return err
		}
	}
	var tdLast, bareLast TauTiming
	for round := range max(r.o.Rounds, r.pick(9, 2)) {
		sides := []func() error{side(TauTooldispatch, &td, &tdConn, &tdCPU, &tdLast), side(TauBare, &bare, &bareConn, &bareCPU, &bareLast)}
		if round%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return err
			}
		}
		ratio.Rounds = append(ratio.Rounds, tdLast.Total.Seconds()/bareLast.Total.Seconds())
		perCall = append(perCall, float64(tdLast.Mallocs)/float64(tdLast.Calls))
	}
	td.AllocsPerCall = median(perCall)
	r.rep.add(td)
	r.rep.add(bare)
	r.rep.add(tdConn)
	r.rep.add(bareConn)
	r.rep.add(tdCPU)
	r.rep.add(bareCPU)
	r.rep.add(ratio)
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
