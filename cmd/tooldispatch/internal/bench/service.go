package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cmd/tooldispatch/service"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// Workload names of the service load.
const (
	wSvcRate = "service: 100 clients, 10-call turns of calculate over HTTP"
	wSvcP50  = "service: turn latency p50"
	wSvcP99  = "service: turn latency p99"
)

// ServiceLoad is what the service load generator measured.
type ServiceLoad struct {
	Clients   int
	Turns     int // answered turns
	Calls     int
	Elapsed   time.Duration
	Latencies []time.Duration // sorted, one per answered turn
}

// P returns the q-quantile (0 < q ≤ 1) of the latencies.
func (l *ServiceLoad) P(q float64) time.Duration {
	if len(l.Latencies) == 0 {
		return 0
	}
	return l.Latencies[min(len(l.Latencies)-1, int(float64(len(l.Latencies))*q))]
}

// CallsPerSecond is the calls answered per second of the run.
func (l *ServiceLoad) CallsPerSecond() float64 { return float64(l.Calls) / l.Elapsed.Seconds() }

// ServiceLoadOptions bound one run of the load generator.
type ServiceLoadOptions struct {
	Clients        int
	CallsPerTurn   int
	Duration       time.Duration // the run ends at this time…
	TurnsPerClient int           // …or when every client has posted this many turns
}

// RunServiceLoad starts the HTTP service (package service over the actors
// dispatcher, Badger without fsync in a temporary directory, the built-in
// tools) on 127.0.0.1:0 in this process, and has o.Clients clients, each on
// a session of its own, post turns of o.CallsPerTurn calculate calls until
// o.Duration has passed or each has posted o.TurnsPerClient turns. Every
// reply is checked (status 200, one ok result per call, the right value).
func RunServiceLoad(ctx context.Context, o ServiceLoadOptions) (*ServiceLoad, error) {
	dir, err := os.MkdirTemp("", "tooldispatch-bench-svc-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	store, err := cachestore.OpenBadger(cachestore.BadgerOptions{Dir: dir, Small: true, Logger: zerolog.Nop()})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	builtin.Register(reg, builtin.Deps{})
	broker := service.NewBroker(service.BrokerOptions{})
	metrics := service.NewMetrics(reg)
	disp, err := actors.New(actors.Config{Registry: reg, Store: store, Events: broker.Publish, Observer: metrics, Logger: zerolog.Nop()})
	if err != nil {
		return nil, err
	}
	srv, err := service.New(service.Options{Dispatcher: disp, Registry: reg, Store: store, Broker: broker, Metrics: metrics,
		Approve: actors.ApproveAll})
	if err != nil {
		_ = disp.Close(ctx)
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = disp.Close(ctx)
		return nil, err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = disp.Close(sctx)
		_ = hs.Shutdown(sctx)
	}()

	tr := &http.Transport{MaxIdleConns: 2 * o.Clients, MaxIdleConnsPerHost: 2 * o.Clients, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	base := "http://" + ln.Addr().String()

	lctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	type result struct {
		lat []time.Duration
		err error
	}
	results := make([]result, o.Clients)
	var wg sync.WaitGroup
	t0 := time.Now()
	for c := range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := "svc-" + strconv.Itoa(c)
			for k := 0; k < o.TurnsPerClient && lctx.Err() == nil; k++ {
				d, err := postCalcTurn(client, base, session, k, o.CallsPerTurn)
				if err != nil {
					results[c].err = fmt.Errorf("%s turn %d: %w", session, k, err)
					return
				}
				results[c].lat = append(results[c].lat, d)
			}
		}()
	}
	wg.Wait()
	load := &ServiceLoad{Clients: o.Clients, Elapsed: time.Since(t0)}
	for _, r := range results {
		if r.err != nil {
			return nil, r.err
		}
		load.Latencies = append(load.Latencies, r.lat...)
	}
	slices.Sort(load.Latencies)
	load.Turns = len(load.Latencies)
	load.Calls = load.Turns * o.CallsPerTurn
	if load.Turns == 0 {
		return nil, errors.New("no turn was answered")
	}
	return load, nil
}

// postCalcTurn posts one turn of calls calculate calls and checks the reply.
func postCalcTurn(client *http.Client, base, session string, k, calls int) (time.Duration, error) {
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	tc := make([]call, calls)
	for i := range tc {
		x := k*calls + i
		tc[i] = call{ID: "c" + strconv.Itoa(i), Type: "function",
			Function: fn{Name: "calculate", Arguments: `{"expression":"` + strconv.Itoa(x) + ` * 3"}`}}
	}
	body, err := json.Marshal(map[string]any{"run": "load", "provider": toolkit.ProviderClaudeCode, "approve": actors.ApproveAll, "auto_load_schemas": true,
		"message": map[string]any{"role": "assistant", "content": "", "tool_calls": tc}})
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequest("POST", base+"/v1/sessions/"+session+"/turns", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d: %.200s", resp.StatusCode, data)
	}
	var reply struct {
		Messages []struct {
			Status  string `json:"status"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(data, &reply); err != nil {
		return 0, err
	}
	if len(reply.Messages) != calls {
		return 0, fmt.Errorf("%d results for %d calls", len(reply.Messages), calls)
	}
	for i, m := range reply.Messages {
		if m.Status != string(toolkit.StatusOK) || m.Content != strconv.Itoa(3*(k*calls+i)) {
			return 0, fmt.Errorf("call %d: %s %q", i, m.Status, m.Content)
		}
	}
	return d, nil
}

// service runs the load generator: 100 clients (20 with Quick), 10-call
// turns of calculate, a few seconds per round (1 s with Quick).
func (r *runner) service(ctx context.Context) error {
	o := ServiceLoadOptions{Clients: 100, CallsPerTurn: 10, Duration: 5 * time.Second, TurnsPerClient: 2000}
	if r.o.Quick {
		o = ServiceLoadOptions{Clients: 20, CallsPerTurn: 10, Duration: time.Second, TurnsPerClient: 5}
	}
	rounds := min(r.o.Rounds, r.pick(3, 1))
	rate := Row{Workload: wSvcRate, System: SysBadger, Unit: "calls/s"}
	p50 := Row{Workload: wSvcP50, System: SysBadger, Unit: "ms"}
	p99 := Row{Workload: wSvcP99, System: SysBadger, Unit: "ms"}
	turns := 0
	var perTurn []float64
	for range rounds {
		runtime.GC()
		m0 := mallocs()
		l, err := RunServiceLoad(ctx, o)
		if err != nil {
			return err
		}
		perTurn = append(perTurn, float64(mallocs()-m0)/float64(l.Turns))
		turns += l.Turns
		rate.Rounds = append(rate.Rounds, l.CallsPerSecond())
		p50.Rounds = append(p50.Rounds, float64(l.P(0.50).Microseconds())/1e3)
		p99.Rounds = append(p99.Rounds, float64(l.P(0.99).Microseconds())/1e3)
	}
	rate.AllocsPerTurn = median(perTurn)
	rate.AllocsPerCall = rate.AllocsPerTurn / float64(o.CallsPerTurn)
	rate.Note = fmt.Sprintf("%d clients on loopback, in-process server, Badger without fsync; %d turns over %d rounds of ≤ %v; allocations of client and server together",
		o.Clients, turns, rounds, o.Duration)
	r.rep.add(rate)
	r.rep.add(p50)
	r.rep.add(p99)
	return nil
}
