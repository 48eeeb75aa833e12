package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tooldispatch/tooldispatch/cmd/tooldispatch/internal/bench/taumcp"
)

const (
	// tauServeEnv makes the test binary the τ-bench MCP server; its value
	// is the path of expected-calls.json.
	tauServeEnv = "TOOLDISPATCH_BENCH_TAU_SERVE"
	// tauRecordEnv names a file the server writes each call it gets to.
	tauRecordEnv = "TOOLDISPATCH_BENCH_TAU_RECORD"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(tauServeEnv); path != "" {
		os.Exit(serveTau(path, os.Getenv(tauRecordEnv)))
	}
	os.Exit(m.Run())
}

func serveTau(path, record string) int {
	w, err := taumcp.Load(path)
	if err != nil {
		return 2
	}
	var rec io.Writer
	if record != "" {
		f, err := os.Create(record)
		if err != nil {
			return 2
		}
		defer f.Close()
		rec = f
	}
	if err := taumcp.Server(w, rec).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// tauOptions loads the workload and runs this test binary as its server.
func tauOptions(tb testing.TB, record string) TauOptions {
	tb.Helper()
	path := tauFile("")
	if path == "" {
		tb.Skip("τ-bench's expected-calls.json is not in ../shared/testdata/tau-bench")
	}
	w, err := taumcp.Load(path)
	if err != nil {
		tb.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	env := map[string]string{tauServeEnv: path}
	if record != "" {
		env[tauRecordEnv] = record
	}
	return TauOptions{Workload: w, Command: []string{exe}, Env: env, Passes: 1}
}

// TestTauSidesMakeTheSameCalls: tooldispatch and the bare client send the
// server the same calls in the same order, all of τ-bench's airline calls.
func TestTauSidesMakeTheSameCalls(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var records [2][]byte
	for i, side := range []func(context.Context, TauOptions) (TauTiming, error){TauTooldispatch, TauBare} {
		rec := dir + "/calls" + string(rune('0'+i))
		o := tauOptions(t, rec)
		tm, err := side(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if tm.Calls != len(o.Workload.Calls) {
			t.Fatalf("side %d made %d calls, want %d", i, tm.Calls, len(o.Workload.Calls))
		}
		if records[i], err = os.ReadFile(rec); err != nil {
			t.Fatal(err)
		}
		if got := bytes.Count(records[i], []byte("\n")); got != len(o.Workload.Calls) {
			t.Fatalf("the server got %d calls from side %d, want %d", got, i, len(o.Workload.Calls))
		}
	}
	if !bytes.Equal(records[0], records[1]) {
		a, b := strings.Split(string(records[0]), "\n"), strings.Split(string(records[1]), "\n")
		for i := range min(len(a), len(b)) {
			if !sameCall(a[i], b[i]) {
				t.Fatalf("call %d differs:\ntooldispatch: %s\nbare:         %s", i, a[i], b[i])
			}
		}
	}
}

// sameCall compares two recorded lines, their arguments as JSON values
// (tooldispatch sends the canonical form of the arguments).
func sameCall(a, b string) bool {
	na, aa, _ := strings.Cut(a, " ")
	nb, ab, _ := strings.Cut(b, " ")
	if na != nb {
		return false
	}
	var va, vb any
	if json.Unmarshal([]byte(aa), &va) != nil || json.Unmarshal([]byte(ab), &vb) != nil {
		return aa == ab
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

// BenchmarkTauMCP runs τ-bench's airline calls over a stdio MCP server,
// through tooldispatch and with a bare go-sdk client, one pass of each per
// iteration, and reports the ratio of their wall times (target ≤ 1.15).
func BenchmarkTauMCP(b *testing.B) {
	ctx := context.Background()
	o := tauOptions(b, "")
	var td, bare, tdConnect, bareConnect float64
	var allocs uint64
	var tdCPU, bareCPU float64
	calls := 0
	for b.Loop() {
		t1, err := TauTooldispatch(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		t2, err := TauBare(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		td += t1.Total.Seconds()
		bare += t2.Total.Seconds()
		tdConnect += t1.Connect.Seconds()
		bareConnect += t2.Connect.Seconds()
		allocs += t1.Mallocs
		tdCPU += t1.CPU.Seconds()
		bareCPU += t2.CPU.Seconds()
		calls += t1.Calls
	}
	n := float64(b.N)
	b.ReportMetric(td/bare, "ratio")
	b.ReportMetric(td/n*1e3, "td-ms")
	b.ReportMetric(bare/n*1e3, "bare-ms")
	b.ReportMetric(tdConnect/n*1e3, "td-connect-ms")
	b.ReportMetric(bareConnect/n*1e3, "bare-connect-ms")
	b.ReportMetric(float64(allocs)/float64(calls), "td-allocs/call")
	b.ReportMetric(tdCPU/n*1e3, "td-cpu-ms")
	b.ReportMetric(bareCPU/n*1e3, "bare-cpu-ms")
}

// TestTauServerBuiltOnlyFromTooldispatch: `tooldispatch bench` builds the
// MCP workload's server only from tooldispatch's own module; run from a
// directory of another module, it builds nothing and says why.
func TestTauServerBuiltOnlyFromTooldispatch(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/go.mod", []byte("module example.com/other\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir+"/cmd/tooldispatch/internal/bench/taumcp/taumcp-server", 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	bin, err := buildTauServer(context.Background(), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "is not tooldispatch's module") {
		t.Fatalf("buildTauServer = %q, %v; want a refusal naming the module", bin, err)
	}
}
