package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tooldispatch/tooldispatch/service/client"
)

// The cluster measurement (TestClusterThroughput, run with
// TOOLDISPATCH_CLUSTER_BENCH=1): 1, 2 and 3 members on loopback, each once
// with the requests spread over the members as a load balancer without
// owner routing would (every member takes every session: (n-1)/n of the
// turns cross to the owner and back) and once through the Go client, which
// sends each session's turns to its owner. Besides calls/s it reads what
// the N-machine model in docs/PERFORMANCE.md needs: the CPU time of each
// member process and of PostgreSQL (from /proc), the cross-member hops
// (tooldispatch_cluster_forwarded_total), the database's write
// transactions and WAL bytes, and the bytes on the members' cluster
// connections (ss). TOOLDISPATCH_CLUSTER_BENCH_SECONDS sets the length of
// a run (default 10).

// clkTck is the kernel's USER_HZ, the unit of /proc/PID/stat CPU times
// (100 on every Linux architecture Go supports, except alpha).
const clkTck = 100

// benchSample is one run of the load.
type benchSample struct {
	members  int
	routing  string
	turns    int
	failed   int
	calls    int
	dur      time.Duration
	memberMS []float64 // CPU ms of each member process
	loadMS   float64   // CPU ms of this process (the load generator)
	machine  float64   // CPU ms the whole machine used (/proc/stat)
	pgMS     float64   // CPU ms of the PostgreSQL processes (-1: unknown)
	hops     int
	pg       pgStats
	wire     int64 // bytes on the members' cluster connections
}

func (s benchSample) row() string {
	total := 0.0
	for _, v := range s.memberMS {
		total += v
	}
	pg := "n/a"
	if s.pgMS >= 0 {
		pg = fmt.Sprintf("%.0f", s.pgMS*1000/float64(max(s.calls, 1)))
	}
	turns := float64(max(s.turns, 1))
	ours := total + s.loadMS + max(s.pgMS, 0)
	others := (s.machine - ours) / float64(s.dur.Milliseconds())
	return fmt.Sprintf("| %d | %s | %.0f | %.2f | %.0f | %s | %.0f | %.2f | %.2f | %.0f | %.0f | %d |",
		s.members, s.routing, float64(s.calls)/s.dur.Seconds(), float64(s.hops)/turns,
		total*1000/float64(max(s.calls, 1)), pg, s.loadMS*1000/float64(max(s.calls, 1)), others, float64(s.pg.xacts)/turns, float64(s.pg.wal)/turns,
		float64(s.wire)/turns, s.failed)
}

const benchHeader = "| members | routing | calls/s | hops/turn | members' CPU µs/call | PostgreSQL CPU µs/call | load generator CPU µs/call | other processes' cores | PG write transactions/turn | WAL bytes/turn | cluster bytes/turn | failed turns |\n|---|---|---|---|---|---|---|---|---|---|---|---|"

// measureClusterThroughput runs the whole measurement and logs one table.
func measureClusterThroughput(t *testing.T) {
	const clients, callsPerTurn = 32, 10
	dur := 10 * time.Second
	if s, err := strconv.Atoi(os.Getenv("TOOLDISPATCH_CLUSTER_BENCH_SECONDS")); err == nil && s > 0 {
		dur = time.Duration(s) * time.Second
	}
	var calls []map[string]any
	for i := 0; i < callsPerTurn; i++ {
		args, _ := json.Marshal(map[string]any{"expression": fmt.Sprintf("%d*7", i)})
		calls = append(calls, map[string]any{"id": fmt.Sprintf("c%d", i), "type": "function", "function": map[string]any{"name": "calculate", "arguments": string(args)}})
	}
	var rows []string
	for n := 1; n <= 3; n++ {
		ms, ports := startCluster(t, n, t.TempDir())
		pg := pgFromMembers(t, ms)
		hc := ownerClient(t)
		for _, routing := range []string{"spread", "owner"} {
			var c *client.Client
			if routing == "owner" {
				var urls []string
				for _, m := range ms {
					urls = append(urls, m.http)
				}
				var err error
				if c, err = client.New(client.Options{Members: urls, HTTP: hc}); err != nil {
					t.Fatal(err)
				}
			}
			s := measure(t, ms, ports, pg, hc, dur, func(ctx context.Context, cl, k int) error {
				session := fmt.Sprintf("tp-%d-%s-%d", n, routing, cl)
				if c == nil {
					_, err := postTurnWith(ctx, hc, ms[cl%n].http, session, "", calls...)
					return err
				}
				res, err := c.Turn(ctx, session, map[string]any{"run": "r", "provider": "claude-code", "auto_load_schemas": true, "approve": "all",
					"message": map[string]any{"role": "assistant", "tool_calls": calls}})
				if err == nil && res.Status != http.StatusOK {
					err = fmt.Errorf("status %d", res.Status)
				}
				return err
			}, clients)
			s.members, s.routing, s.calls = n, routing, s.turns*callsPerTurn
			rows = append(rows, s.row())
			t.Logf("%s", s.row())
		}
		for _, m := range ms {
			_ = m.cmd.Process.Kill()
			_ = m.cmd.Wait()
		}
	}
	// The cost of one hop: two members, every turn sent to the member that
	// does not own its session ("forwarded": member 0 forwards, member 1
	// runs), then to the owner ("direct").
	ms, ports := startCluster(t, 2, t.TempDir())
	pg := pgFromMembers(t, ms)
	hc := ownerClient(t)
	var sessions []string
	for i := 0; len(sessions) < clients; i++ {
		s := fmt.Sprintf("hop-%d", i)
		r, err := postTurnWith(context.Background(), hc, ms[0].http, s, "", calls[0])
		if err != nil {
			t.Fatal(err)
		}
		if ownerOf(t, ports, 2, r.Member) == 1 {
			sessions = append(sessions, s)
		}
	}
	var hopRows []string
	for _, entry := range []int{0, 1} {
		s := measure(t, ms, ports, pg, hc, dur, func(ctx context.Context, cl, k int) error {
			_, err := postTurnWith(ctx, hc, ms[entry].http, sessions[cl], "", calls...)
			return err
		}, clients)
		s.members, s.routing, s.calls = 2, map[int]string{0: "all forwarded 0→1", 1: "all direct to 1"}[entry], s.turns*callsPerTurn
		hopRows = append(hopRows, fmt.Sprintf("%s member 0: %.1f µs/call, member 1: %.1f µs/call", s.row(),
			s.memberMS[0]*1000/float64(s.calls), s.memberMS[1]*1000/float64(s.calls)))
	}
	for _, m := range ms {
		_ = m.cmd.Process.Kill()
		_ = m.cmd.Wait()
	}
	latRows := measurePGLatency(t, dur, calls, clients)
	t.Logf("owner routing, 10-call turns of calculate, %d clients, %s per run:\n%s\n%s\n\nthe cost of a hop:\n%s\n%s\n\nPostgreSQL behind a delay:\n%s",
		clients, dur, benchHeader, strings.Join(rows, "\n"), benchHeader, strings.Join(hopRows, "\n"), strings.Join(latRows, "\n"))
}

// measurePGLatency runs 1 and 2 members with owner routing against a
// PostgreSQL behind a delay proxy, and reads the round trips per turn and
// the round-trip time the members see.
func measurePGLatency(t *testing.T, dur time.Duration, calls []map[string]any, clients int) []string {
	pgURL := pgServer(t)
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, oneWay := range []time.Duration{250 * time.Microsecond, time.Millisecond} {
		proxy := startDelayProxy(t, u.Host, oneWay)
		pu := *u
		pu.Host = proxy.addr
		t.Setenv("TOOLDISPATCH_PG_URL", pu.String())
		rtt := pgRTT(t, pu.String())
		for n := 1; n <= 2; n++ {
			ms, _ := startCluster(t, n, t.TempDir())
			hc := ownerClient(t)
			var urls []string
			for _, m := range ms {
				urls = append(urls, m.http)
			}
			c, err := client.New(client.Options{Members: urls, HTTP: hc})
			if err != nil {
				t.Fatal(err)
			}
			// The round-trip time the members see, sampled during the load.
			probe, err := pgx.Connect(context.Background(), pu.String())
			if err != nil {
				t.Fatal(err)
			}
			var rtts []time.Duration
			probeDone := make(chan struct{})
			sends0 := proxy.sends.Load()
			start := time.Now()
			go func() {
				defer close(probeDone)
				for time.Since(start) < dur {
					t0 := time.Now()
					if _, err := probe.Exec(context.Background(), "SELECT 1"); err != nil {
						return
					}
					rtts = append(rtts, time.Since(t0))
					time.Sleep(20 * time.Millisecond)
				}
			}()
			end := start.Add(dur)
			var turns, failed atomic.Int64
			var wg sync.WaitGroup
			for cl := 0; cl < clients; cl++ {
				wg.Add(1)
				go func(cl int) {
					defer wg.Done()
					for time.Now().Before(end) {
						res, err := c.Turn(context.Background(), fmt.Sprintf("lat-%d-%d", n, cl), map[string]any{"run": "r", "provider": "claude-code",
							"auto_load_schemas": true, "approve": "all", "message": map[string]any{"role": "assistant", "tool_calls": calls}})
						if err != nil || res.Status != http.StatusOK {
							failed.Add(1)
						} else {
							turns.Add(1)
						}
					}
				}(cl)
			}
			wg.Wait()
			elapsed := time.Since(start)
			<-probeDone
			probe.Close(context.Background())
			// The probe's own round trips are not the members'.
			rt := float64(proxy.sends.Load()-sends0-int64(len(rtts))) / float64(max(turns.Load(), 1))
			loaded := rtt
			if len(rtts) > 0 {
				slices.Sort(rtts)
				loaded = rtts[len(rtts)/2]
			}
			rows = append(rows, fmt.Sprintf("| %d | %s | %.2f ms | %.2f ms | %.0f | %.1f | %.0f | %.0f | %d |", n, oneWay, float64(rtt.Microseconds())/1000,
				float64(loaded.Microseconds())/1000, float64(turns.Load())*float64(len(calls))/elapsed.Seconds(), rt,
				float64(turns.Load())/elapsed.Seconds(), float64(n*pgPoolConns)/(rt*loaded.Seconds()), failed.Load()))
			t.Logf("%s", rows[len(rows)-1])
			for _, m := range ms {
				_ = m.cmd.Process.Kill()
				_ = m.cmd.Wait()
			}
		}
	}
	return append([]string{"| members | proxy delay each way | PG RTT idle | PG RTT under load | calls/s | PG round trips/turn | turns/s | model: members × pool / (round trips × RTT) turns/s | failed |",
		"|---|---|---|---|---|---|---|---|---|"}, rows...)
}

// pgPoolConns is pgxpool's default pool size on this 2-core machine
// (max(4, GOMAXPROCS)): the connections a member commits over.
const pgPoolConns = 4

// pgRTT is the median time of SELECT 1 over url.
func pgRTT(t *testing.T, url string) time.Duration {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var ds []time.Duration
	for i := 0; i < 21; i++ {
		start := time.Now()
		if _, err := conn.Exec(context.Background(), "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// measure runs load from clients goroutines for dur and reads the
// counters around it.
func measure(t *testing.T, ms []*member, ports []int, pg *pgProbe, hc *http.Client, dur time.Duration,
	turn func(ctx context.Context, client, k int) error, clients int) benchSample {
	t.Helper()
	if pids := os.Getenv("TOOLDISPATCH_CLUSTER_BENCH_PIDS"); pids != "" {
		// For an outside profiler (perf record -p): the member processes.
		var list []string
		for _, m := range ms {
			list = append(list, strconv.Itoa(m.cmd.Process.Pid))
		}
		_ = os.WriteFile(pids, []byte(strings.Join(list, " ")+"\n"), 0o600)
	}
	fwd0 := forwardedAll(t, hc, ms)
	cpu0 := memberCPU(ms)
	load0 := procCPU(os.Getpid())
	mach0 := machineCPU()
	pgCPU0 := pg.cpu()
	stats0 := pg.stats(t)
	wire0 := clusterWireBytes(t, ports, len(ms))
	start := time.Now()
	end := start.Add(dur)
	var mu sync.Mutex
	var s benchSample
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for k := 0; time.Now().Before(end); k++ {
				err := turn(context.Background(), c, k)
				mu.Lock()
				if err != nil {
					s.failed++
				} else {
					s.turns++
				}
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	s.dur = time.Since(start)
	cpu1 := memberCPU(ms)
	s.loadMS = procCPU(os.Getpid()) - load0
	s.machine = machineCPU() - mach0
	for i := range ms {
		s.memberMS = append(s.memberMS, cpu1[i]-cpu0[i])
	}
	s.pgMS = -1
	if pgCPU0 >= 0 {
		s.pgMS = pg.cpu() - pgCPU0
	}
	s.wire = clusterWireBytes(t, ports, len(ms)) - wire0
	fwd1 := forwardedAll(t, hc, ms)
	for i := range ms {
		s.hops += fwd1[i] - fwd0[i]
	}
	s.pg = pg.stats(t).minus(stats0)
	return s
}

// postTurnWith posts a turn through hc (following redirects as
// http.Client does by default is not wanted here: hc returns them).
func postTurnWith(ctx context.Context, hc *http.Client, base, session, turnID string, calls ...map[string]any) (*turnReply, error) {
	r, status, _, err := postTurnRaw(ctx, hc, base, session, turnID, calls...)
	return r, turnError(r, status, err)
}

// postTurnRaw posts a turn through hc and returns the reply, its status
// and body, or the error of a request that got no reply or an unreadable
// one.
func postTurnRaw(ctx context.Context, hc *http.Client, base, session, turnID string, calls ...map[string]any) (*turnReply, int, []byte, error) {
	body, _ := json.Marshal(map[string]any{"run": "r", "provider": "claude-code", "auto_load_schemas": true, "approve": "all",
		"turn_id": turnID, "message": map[string]any{"role": "assistant", "tool_calls": calls}})
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/sessions/"+session+"/turns", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, nil, err
	}
	var r turnReply
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, resp.StatusCode, data, err
	}
	return &r, resp.StatusCode, data, nil
}

// turnError is postTurnWith's error for a reply with status, or err.
func turnError(r *turnReply, status int, err error) error {
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("status %d: %s", status, r.Error)
	}
	return nil
}

// machineCPU returns the CPU time every process of the machine used, in
// ms (the busy fields of /proc/stat's cpu line).
func machineCPU() float64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	total := 0.0
	// user nice system idle iowait irq softirq steal: all but idle and iowait.
	for i, v := range f[1:min(len(f), 9)] {
		if i == 3 || i == 4 {
			continue
		}
		n, _ := strconv.ParseFloat(v, 64)
		total += n
	}
	return total * 1000 / clkTck
}

// procCPU returns the user+system CPU time of pid in milliseconds (-1 when
// unreadable).
func procCPU(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return -1
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) * 1000 / clkTck
}

func memberCPU(ms []*member) []float64 {
	var out []float64
	for _, m := range ms {
		out = append(out, procCPU(m.cmd.Process.Pid))
	}
	return out
}

// pgProbe reads the shared PostgreSQL's statistics and, when it runs on
// this machine, its processes' CPU time.
type pgProbe struct {
	conn       *pgx.Conn
	postmaster int // 0: not local
}

// pgStats: write transactions and WAL bytes.
type pgStats struct{ xacts, wal int64 }

func (a pgStats) minus(b pgStats) pgStats { return pgStats{a.xacts - b.xacts, a.wal - b.wal} }

// pgFromMembers connects to the PostgreSQL the members were started with.
func pgFromMembers(t *testing.T, ms []*member) *pgProbe {
	t.Helper()
	args := ms[0].cmd.Args
	url := ""
	for i, a := range args {
		if a == "--postgres" && i+1 < len(args) {
			url = args[i+1]
		}
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("connecting to the members' PostgreSQL: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	p := &pgProbe{conn: conn}
	var dir string
	if conn.QueryRow(context.Background(), "SHOW data_directory").Scan(&dir) == nil {
		if data, err := os.ReadFile(filepath.Join(dir, "postmaster.pid")); err == nil {
			p.postmaster, _ = strconv.Atoi(strings.SplitN(string(data), "\n", 2)[0])
		}
	}
	return p
}

// cpu returns the CPU time of the postmaster and its children in ms (-1
// when not local).
func (p *pgProbe) cpu() float64 {
	if p.postmaster == 0 {
		return -1
	}
	total := procCPU(p.postmaster)
	if total < 0 {
		return -1
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(p.postmaster) {
			if c := procCPU(pid); c > 0 {
				total += c
			}
		}
	}
	return total
}

// stats reads the database's write position: the next transaction id
// (one is assigned to every transaction that writes) and the WAL position
// (the bytes of every change). Neither waits for the statistics
// collector, and reading them writes nothing.
func (p *pgProbe) stats(t *testing.T) pgStats {
	t.Helper()
	var s pgStats
	err := p.conn.QueryRow(context.Background(), `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint,
		pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&s.xacts, &s.wal)
	if err != nil {
		t.Fatalf("reading the database's write position: %v", err)
	}
	return s
}

// clusterWireBytes sums the bytes both ways on the TCP connections to the
// members' cluster ports (the members' gRPC streams), counted once per
// connection at its client end.
func clusterWireBytes(t *testing.T, ports []int, n int) int64 {
	t.Helper()
	var filter []string
	for i := 0; i < n; i++ {
		filter = append(filter, fmt.Sprintf("dport = :%d", ports[n+i]))
	}
	out, err := exec.Command("ss", "-tinH", "state", "established", "( "+strings.Join(filter, " or ")+" )").Output()
	if err != nil {
		return 0
	}
	var total int64
	for _, f := range strings.Fields(string(out)) {
		for _, key := range []string{"bytes_acked:", "bytes_received:"} {
			if v, ok := strings.CutPrefix(f, key); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
			}
		}
	}
	return total
}
