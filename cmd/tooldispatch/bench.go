package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tooldispatch/tooldispatch/cmd/tooldispatch/internal/bench"
)

const benchUsage = `Usage:
  tooldispatch bench [--quick] [--rounds N] [--json FILE] [--peers DIR] [--no-peers] [--tau-bench FILE]
  tooldispatch bench --service [--quick] [--rounds N] [--json FILE]

Runs the performance workloads against (a) tooldispatch with Badger on disk,
(b) tooldispatch with the in-memory store, (c) a bare dispatcher without
actors doing the same validation and commit, and (d) cloudwego/eino's
ToolsNode (run with "go run" from the peers module, in a temporary go.work
with this checkout), then prints medians, the ratio of each to (a), the
targets and the machine's facts.

The MCP workload makes τ-bench's airline calls (--tau-bench) against a
small stdio MCP server built with "go build" from this checkout, once
through tooldispatch (validation, approval "all", commit to Badger) and
once with a bare go-sdk client, the same calls in the same order, and
compares their wall times.

With --service it runs only the service load generator: the HTTP service
started in this process on 127.0.0.1 (Badger without fsync, the built-in
tools), 100 clients on sessions of their own posting 10-call turns of
calculate for a few seconds per round, first each as fast as it is answered,
then paced to 5 000 calls/s together; it prints calls/s and the p50 and p99
turn latency of both. The full run includes it too.

Flags:
`

// cmdBench implements "tooldispatch bench".
func (e *env) cmdBench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage)
		fs.PrintDefaults()
	}
	quick := fs.Bool("quick", false, "fewer rounds and smaller workloads (a smoke run)")
	rounds := fs.Int("rounds", 0, "rounds per workload; the median is reported (default 5, 2 with --quick)")
	jsonOut := fs.String("json", "", "also write the report as JSON to `FILE` (- for stdout instead of the table)")
	peers := fs.String("peers", "", "`DIR` of the peers module (default: integration_test/peers found from the working directory)")
	noPeers := fs.Bool("no-peers", false, "do not measure eino")
	svc := fs.Bool("service", false, "run only the service load generator (HTTP on loopback)")
	tau := fs.String("tau-bench", "", "τ-bench expected-calls.json `FILE` (default: ../shared/testdata/tau-bench found from the working directory)")
	if wantsHelp(args) {
		fs.SetOutput(e.stdout)
		fs.Usage()
		return nil
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return &exitError{code: exitUsage}
	}
	if fs.NArg() > 0 || *rounds < 0 {
		fs.Usage()
		return &exitError{code: exitUsage}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Options{Quick: *quick, Rounds: *rounds, PeersDir: *peers, NoPeers: *noPeers,
		TauBench: *tau, Log: e.stderr, ServiceOnly: *svc})
	if err != nil {
		return failf(exitFailure, "bench: %v", err)
	}
	if *jsonOut == "-" {
		if err := rep.WriteJSON(e.stdout); err != nil {
			return failf(exitFailure, "bench: %v", err)
		}
		return nil
	}
	if err := rep.WriteTable(e.stdout); err != nil {
		return failf(exitFailure, "bench: %v", err)
	}
	if *jsonOut != "" {
		f, err := os.Create(*jsonOut)
		if err != nil {
			return failf(exitFailure, "bench: %v", err)
		}
		if err := rep.WriteJSON(f); err != nil {
			f.Close()
			return failf(exitFailure, "bench: %v", err)
		}
		if err := f.Close(); err != nil {
			return failf(exitFailure, "bench: %v", err)
		}
	}
	return nil
}
