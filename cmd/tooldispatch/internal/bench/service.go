package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/service"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// Workload names of the service load.
const (
	wSvcRate      = "service: 100 clients, 10-call turns of calculate over HTTP"
	wSvcP50       = "service: turn latency p50"
	wSvcP99       = "service: turn latency p99"
	wSvcPacedRate = "service: 100 clients paced to 5 000 calls/s offered"
	wSvcPacedP50  = "service: turn latency p50 at 5 000 calls/s offered"
	wSvcPacedP99  = "service: turn latency p99 at 5 000 calls/s offered"
	wSvcHalfRate  = "service: 100 clients paced to half the closed-loop calls/s"
	wSvcHalfP50   = "service: turn latency p50 at half the closed-loop calls/s offered"
	wSvcHalfP99   = "service: turn latency p99 at half the closed-loop calls/s offered"
)

// svcPacedRate is the offered load of the paced service run, calls/s.
const svcPacedRate = 5000

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
	// Rate, when set, paces the clients to offer this many calls per
	// second together (open loop): client c posts turn k at
	// start + (k + c/Clients) × Clients×CallsPerTurn/Rate, and a turn's
	// latency counts from that time, so a turn posted late because the
	// one before it was slow counts the wait as well. Zero: every client
	// posts its next turn as soon as the last is answered (closed loop),
	// which measures the most calls/s but makes the mean latency
	// Clients / turns per second by Little's law.
	Rate float64
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
	store, err := badger.Open(badger.Options{Dir: dir, Small: true, Logger: zerolog.Nop()})
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

	// One kept-alive connection per client: the pool holds them all, and no
	// client ever waits for a connection or dials a second one.
	tr := &http.Transport{MaxIdleConns: o.Clients, MaxIdleConnsPerHost: o.Clients, MaxConnsPerHost: o.Clients,
		IdleConnTimeout: time.Minute, DisableCompression: true}
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
			results[c].lat, results[c].err = runServiceClient(lctx, newCalcClient(client, base, session, o.CallsPerTurn), session, c, o, t0)
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

// runServiceClient posts client c's turns, paced to o.Rate when it is set
// (client c's k-th turn is due at t0 + k intervals, the clients spread
// over an interval), until lctx ends or it has posted o.TurnsPerClient;
// it returns their latencies from when each was due.
func runServiceClient(lctx context.Context, cl *calcClient, session string, c int, o ServiceLoadOptions, t0 time.Time) ([]time.Duration, error) {
	var interval time.Duration
	if o.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(o.Clients*o.CallsPerTurn) / o.Rate)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var lat []time.Duration
	for k := 0; k < o.TurnsPerClient && lctx.Err() == nil; k++ {
		start := time.Now()
		if interval > 0 {
			start = t0.Add(time.Duration(k)*interval + time.Duration(c)*interval/time.Duration(o.Clients))
			if wait := time.Until(start); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-lctx.Done():
					return lat, nil
				}
			}
		}
		d, err := cl.post(k, start)
		if err != nil {
			return lat, fmt.Errorf("%s turn %d: %w", session, k, err)
		}
		lat = append(lat, d)
	}
	return lat, nil
}

// calcClient is one client of the load: its session, and the buffers its
// turns reuse (request body, reply, decoded reply).
type calcClient struct {
	client  *http.Client
	url     string // the session's turns endpoint
	calls   int
	body    []byte
	reply   bytes.Buffer
	decoded calcReply
}

type calcReply struct {
	Messages []struct {
		Status  string `json:"status"`
		Content string `json:"content"`
	} `json:"messages"`
}

func newCalcClient(client *http.Client, base, session string, calls int) *calcClient {
	return &calcClient{client: client, url: base + "/v1/sessions/" + session + "/turns", calls: calls}
}

// turnBody appends the body of turn k: calls calculate calls "x * 3" with
// x = k*calls + i.
func turnBody(b []byte, k, calls int) []byte {
	b = append(b, `{"run":"load","provider":"`...)
	b = append(b, toolkit.ProviderClaudeCode...)
	b = append(b, `","approve":"`...)
	b = append(b, actors.ApproveAll...)
	b = append(b, `","auto_load_schemas":true,"message":{"role":"assistant","content":"","tool_calls":[`...)
	for i := range calls {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":"c`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `","type":"function","function":{"name":"calculate","arguments":"{\"expression\":\"`...)
		b = strconv.AppendInt(b, int64(k*calls+i), 10)
		b = append(b, ` * 3\"}"}}`...)
	}
	return append(b, "]}}"...)
}

// post posts turn k and checks the reply; it returns the time from start
// to the end of the reply.
func (c *calcClient) post(k int, start time.Time) (time.Duration, error) {
	c.body = turnBody(c.body[:0], k, c.calls)
	req, err := http.NewRequest("POST", c.url, bytes.NewReader(c.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, err
	}
	c.reply.Reset()
	_, err = c.reply.ReadFrom(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	data := c.reply.Bytes()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d: %.200s", resp.StatusCode, data)
	}
	c.decoded.Messages = c.decoded.Messages[:0]
	if err := json.Unmarshal(data, &c.decoded); err != nil {
		return 0, err
	}
	if len(c.decoded.Messages) != c.calls {
		return 0, fmt.Errorf("%d results for %d calls", len(c.decoded.Messages), c.calls)
	}
	var want [20]byte
	for i, m := range c.decoded.Messages {
		if m.Status != string(toolkit.StatusOK) || m.Content != string(strconv.AppendInt(want[:0], int64(3*(k*c.calls+i)), 10)) {
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
	rate.Note = fmt.Sprintf("%d clients on loopback, in-process server, Badger without fsync; %d turns over %d rounds of ≤ %v; allocations of client and server together; closed loop: mean latency = clients / turns per second",
		o.Clients, turns, rounds, o.Duration)
	r.rep.add(rate)
	r.rep.add(p50)
	r.rep.add(p99)

	// The same clients paced to a fixed rate and to half of what the closed
	// loop measured: the latency a turn sees when the service is asked for
	// a load it can carry, not for all it can do.
	fixed := float64(svcPacedRate)
	if r.o.Quick {
		fixed = svcPacedRate / 5
	}
	paced := func(rate float64, wRate, w50, w99 string) error {
		o.Rate = rate
		prate := Row{Workload: wRate, System: SysBadger, Unit: "calls/s"}
		pp50 := Row{Workload: w50, System: SysBadger, Unit: "ms"}
		pp99 := Row{Workload: w99, System: SysBadger, Unit: "ms"}
		for range rounds {
			l, err := RunServiceLoad(ctx, o)
			if err != nil {
				return err
			}
			prate.Rounds = append(prate.Rounds, l.CallsPerSecond())
			pp50.Rounds = append(pp50.Rounds, float64(l.P(0.50).Microseconds())/1e3)
			pp99.Rounds = append(pp99.Rounds, float64(l.P(0.99).Microseconds())/1e3)
		}
		prate.Note = fmt.Sprintf("%.0f calls/s offered: %d clients, each posting a turn every %v (open loop); latency from the time a turn was due", rate, o.Clients,
			time.Duration(float64(time.Second)*float64(o.Clients*o.CallsPerTurn)/o.Rate))
		r.rep.add(prate)
		r.rep.add(pp50)
		r.rep.add(pp99)
		return nil
	}
	if err := paced(fixed, wSvcPacedRate, wSvcPacedP50, wSvcPacedP99); err != nil {
		return err
	}
	return paced(median(rate.Rounds)/2, wSvcHalfRate, wSvcHalfP50, wSvcHalfP99)
}
