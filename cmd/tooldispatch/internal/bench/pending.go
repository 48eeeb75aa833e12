package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/service"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// The approvals listing at scale: a service whose store holds many
// deferred approvals, read through GET /v1/pending a page at a time.

// PendingSeed describes the deferred approvals a pending service starts
// with: Sessions sessions of one turn each, of Deferred edit_file calls
// awaiting approval among Others calculate calls (spread through the
// turn), each call's arguments padded to ArgBytes.
type PendingSeed struct {
	Sessions, Deferred, Others int
	ArgBytes                   int
}

// PendingService is the HTTP service (package service over the actors
// dispatcher and Badger without fsync in a temporary directory) on
// 127.0.0.1:0 of this process, its store seeded as a PendingSeed says.
type PendingService struct {
	Base   string
	Client *http.Client
	// Items is how many approvals wait; TurnBytes the size of one
	// seeded turn record.
	Items, TurnBytes int
	stop             func()
}

// seedTurn is session s's turn as the seed says, with its approvals,
// asked from asked on, one microsecond apart.
func (sd PendingSeed) seedTurn(s string, asked time.Time) *cachestore.TurnCommit {
	n := sd.Deferred + sd.Others
	every := max(1, n/max(1, sd.Deferred))
	rec := &messages.TurnRecord{Turn: 1, Run: "r", TurnId: "t-" + s, Provider: toolkit.ProviderClaudeCode,
		TimeUnixNano: asked.UnixNano(), Assistant: &messages.AssistantMessage{Role: "assistant",
			Content: "I will change the configuration files and check the sums."}}
	c := &cachestore.TurnCommit{Session: s, Record: rec}
	pad := strings.Repeat("x", max(0, sd.ArgBytes-40))
	for i := range n {
		id := fmt.Sprintf("ca%04d", i)
		deferred := i%every == 0 && len(c.Approvals) < sd.Deferred
		name, args, msg := "calculate", fmt.Sprintf(`{"expression":"%d + 1"%s}`, i, padding(pad)), &messages.ToolMessage{
			Role: "tool", ToolCallId: id, Name: "calculate", Status: "ok", Content: fmt.Sprint(i + 1)}
		if deferred {
			path := fmt.Sprintf("conf/f%04d.toml", i)
			name, args = "edit_file", fmt.Sprintf(`{"path":%q,"content":"value = %d\n"%s}`, path, i, padding(pad))
			msg = &messages.ToolMessage{Role: "tool", ToolCallId: id, Name: name, Status: cachestore.StatusAwaitingApproval,
				Content: "edit_file was not run yet: it changes things and waits for a person's approval."}
			c.Approvals = append(c.Approvals, &cachestore.Approval{Session: s, Run: "r", Turn: 1, CallID: id, Tool: name,
				Arguments: []byte(args), ArgsHash: fmt.Sprintf("%064x", i+1), State: path + "\x00missing\n", Shown: args,
				Diff:    fmt.Sprintf("--- /dev/null\n+++ b/%s\n@@ -0,0 +1 @@\n+value = %d\n", path, i),
				Ceiling: actors.ApproveAsk, Answerer: "confirm", Asked: asked.Add(time.Duration(len(c.Approvals)) * time.Microsecond)})
		}
		rec.Assistant.ToolCalls = append(rec.Assistant.ToolCalls, &messages.ToolCall{Id: id, Type: "function",
			Function: &messages.FunctionCall{Name: name, Arguments: args}})
		rec.ToolMessages = append(rec.ToolMessages, msg)
	}
	return c
}

// padding is the field that pads a call's arguments, none for "".
func padding(pad string) string {
	if pad == "" {
		return ""
	}
	return `,"note":"` + pad + `"`
}

// StartPendingService starts a pending service. Close stops it and removes
// its store.
func StartPendingService(ctx context.Context, sd PendingSeed) (*PendingService, error) {
	dir, err := os.MkdirTemp("", "tooldispatch-bench-pending-*")
	if err != nil {
		return nil, err
	}
	store, err := badger.Open(badger.Options{Dir: dir, Small: true, Logger: zerolog.Nop()})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p := &PendingService{}
	t0 := time.Unix(1_800_000_000, 0).UTC()
	if err := seedPending(ctx, store, sd, t0, p); err != nil {
		store.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	builtin.Register(reg, builtin.Deps{})
	broker := service.NewBroker(service.BrokerOptions{})
	mets := service.NewMetrics(reg)
	disp, err := actors.New(actors.Config{Registry: reg, Store: store, Events: broker.Publish, Observer: mets, Logger: zerolog.Nop()})
	if err == nil {
		var srv *service.Server
		if srv, err = service.New(service.Options{Dispatcher: disp, Registry: reg, Store: store, Broker: broker, Metrics: mets}); err == nil {
			err = p.serve(srv, disp, store, dir)
		}
	}
	if err != nil {
		if disp != nil {
			_ = disp.Close(ctx)
		}
		store.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return p, nil
}

// seedPending commits the seed's turns, 8 at a time.
func seedPending(ctx context.Context, store *badger.Store, sd PendingSeed, t0 time.Time, p *PendingService) error {
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	sem := make(chan struct{}, 8)
	for i := range sd.Sessions {
		c := sd.seedTurn(fmt.Sprintf("sess-%05d", i), t0.Add(time.Duration(i)*time.Millisecond))
		if i == 0 {
			p.TurnBytes = proto.Size(c.Record)
		}
		p.Items += len(c.Approvals)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := store.CommitTurn(ctx, c); err != nil {
				failed.Store(&err)
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return *err
	}
	return nil
}

// serve listens on loopback and sets what Close stops.
func (p *PendingService) serve(srv *service.Server, disp *actors.Dispatcher, store *badger.Store, dir string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	tr := &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}
	p.Base, p.Client = "http://"+ln.Addr().String(), &http.Client{Transport: tr, Timeout: 5 * time.Minute}
	p.stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tr.CloseIdleConnections()
		_ = srv.Shutdown(ctx)
		_ = hs.Shutdown(ctx)
		_ = disp.Close(ctx)
		_ = store.Close()
		_ = os.RemoveAll(dir)
	}
	return nil
}

// Close stops the service and removes its store.
func (p *PendingService) Close() { p.stop() }

// PendingPage is what one GET /v1/pending answered.
type PendingPage struct {
	Items, Bytes int
	Next         string
	Elapsed      time.Duration
}

// Page reads one page: query is the URL's query without "?" (a cursor is
// added when given).
func (p *PendingService) Page(ctx context.Context, query, cursor string) (PendingPage, error) {
	if cursor != "" {
		query += "&cursor=" + url.QueryEscape(cursor)
	}
	req, err := http.NewRequestWithContext(ctx, "GET", p.Base+"/v1/pending?"+query, nil)
	if err != nil {
		return PendingPage{}, err
	}
	t0 := time.Now()
	resp, err := p.Client.Do(req)
	if err != nil {
		return PendingPage{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return PendingPage{}, err
	}
	pg := PendingPage{Bytes: len(body), Elapsed: time.Since(t0)}
	if resp.StatusCode != http.StatusOK {
		return pg, fmt.Errorf("GET /v1/pending?%s: %d %s", query, resp.StatusCode, body[:min(len(body), 200)])
	}
	var r struct {
		Confirmations []json.RawMessage `json:"confirmations"`
		NextCursor    string            `json:"next_cursor"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return pg, err
	}
	pg.Items, pg.Next = len(r.Confirmations), r.NextCursor
	return pg, nil
}

// Walk reads every page of query and returns how many items and bytes
// they held.
func (p *PendingService) Walk(ctx context.Context, query string) (items, bytes int, err error) {
	for cursor := ""; ; {
		pg, err := p.Page(ctx, query, cursor)
		if err != nil {
			return items, bytes, err
		}
		items, bytes = items+pg.Items, bytes+pg.Bytes
		if cursor = pg.Next; cursor == "" {
			return items, bytes, nil
		}
	}
}

// HeapPeak samples the heap's live objects every millisecond while fn
// runs and returns the most it saw above what it was before fn (after a
// collection) and what remains after fn (after a collection), in bytes.
func HeapPeak(fn func()) (peak, after int64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64())
	}
	base := heap().HeapAlloc
	var top atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if v := read(); v > top.Load() {
				top.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	fn()
	close(done)
	wg.Wait()
	return top.Load() - int64(base), int64(heap().HeapAlloc) - int64(base)
}

// Workload names of the approvals listing.
const (
	wPendPage      = "pending: a page of 50, 100 000 approvals over 2 000 sessions (quick: 10 000, 200)"
	wPendPageBytes = "pending: bytes of that page"
	wPendHeap      = "pending: heap left after reading every page"
	wPendBigPage   = "pending: a page of 50, 40 turns of 4 096 calls, 64 deferred each (quick: 4 turns)"
	wPendBigBytes  = "pending: bytes of that page (big turns)"
	wPendBigPeak   = "pending: 8 clients reading every page of the big turns at once, peak heap growth"
)

// pending measures the approvals listing: pages read anywhere in 100 000
// deferred approvals (10 000 with Quick), and the issue-35 shape, 40 turns
// of 4 096 calls with 64 deferred edits each, read by 8 clients at once.
func (r *runner) pending(ctx context.Context) error {
	rounds := min(r.o.Rounds, r.pick(3, 1))
	sessions := r.pick(2000, 200)
	if err := r.pendingMany(ctx, sessions, rounds); err != nil {
		return err
	}
	return r.pendingBig(ctx, r.pick(40, 4), rounds)
}

// pendingMany reads, per round, a page at 20 places spread over the
// listing (their cursors from a walk), and reports the median page's
// time, its bytes, and the heap left after the walk.
func (r *runner) pendingMany(ctx context.Context, sessions, rounds int) error {
	p, err := StartPendingService(ctx, PendingSeed{Sessions: sessions, Deferred: 50})
	if err != nil {
		return err
	}
	defer p.Close()
	var cursors []string
	var walkErr error
	_, left := HeapPeak(func() {
		for cursor := ""; ; {
			pg, err := p.Page(ctx, "limit=50", cursor)
			if err != nil {
				walkErr = err
				return
			}
			cursors = append(cursors, cursor)
			if cursor = pg.Next; cursor == "" {
				return
			}
		}
	})
	if walkErr != nil {
		return walkErr
	}
	note := fmt.Sprintf("%d approvals, %d pages; in-process server on loopback, Badger without fsync", p.Items, len(cursors))
	page := Row{Workload: wPendPage, System: SysBadger, Unit: "ms", Note: note}
	bytes := Row{Workload: wPendPageBytes, System: SysBadger, Unit: "KiB"}
	for range rounds {
		var ms []float64
		var b []float64
		for i := range 20 {
			pg, err := p.Page(ctx, "limit=50", cursors[i*len(cursors)/20])
			if err != nil {
				return err
			}
			ms, b = append(ms, float64(pg.Elapsed.Microseconds())/1e3), append(b, float64(pg.Bytes)/1024)
		}
		page.Rounds, bytes.Rounds = append(page.Rounds, median(ms)), append(bytes.Rounds, median(b))
	}
	r.rep.add(page)
	r.rep.add(bytes)
	r.rep.add(Row{Workload: wPendHeap, System: SysBadger, Unit: "MiB", Rounds: []float64{float64(left) / (1 << 20)},
		Note: "live heap after every page was read, less before (after collections)"})
	return nil
}

// pendingBig reads a page of the issue-35 shape and has 8 clients walk
// the whole listing at once.
func (r *runner) pendingBig(ctx context.Context, sessions, rounds int) error {
	p, err := StartPendingService(ctx, PendingSeed{Sessions: sessions, Deferred: 64, Others: 4032})
	if err != nil {
		return err
	}
	defer p.Close()
	note := fmt.Sprintf("%d turns of %d KB", sessions, p.TurnBytes/1000)
	page := Row{Workload: wPendBigPage, System: SysBadger, Unit: "ms", Note: note}
	bytes := Row{Workload: wPendBigBytes, System: SysBadger, Unit: "KiB"}
	peak := Row{Workload: wPendBigPeak, System: SysBadger, Unit: "MiB"}
	for range rounds {
		pg, err := p.Page(ctx, "limit=50", "")
		if err != nil {
			return err
		}
		page.Rounds, bytes.Rounds = append(page.Rounds, float64(pg.Elapsed.Microseconds())/1e3), append(bytes.Rounds, float64(pg.Bytes)/1024)
		var failed atomic.Pointer[error]
		top, _ := HeapPeak(func() {
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					if _, _, err := p.Walk(ctx, "limit=50"); err != nil {
						failed.Store(&err)
					}
				})
			}
			wg.Wait()
		})
		if err := failed.Load(); err != nil {
			return *err
		}
		peak.Rounds = append(peak.Rounds, float64(top)/(1<<20))
	}
	r.rep.add(page)
	r.rep.add(bytes)
	r.rep.add(peak)
	return nil
}
