package service

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/cachestore/space"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

const mib = 1 << 20

// fakeDisk is the file system of a data folder whose free space the test
// sets; the guard reads it through space.Options.Free.
type fakeDisk struct{ free atomic.Uint64 }

func (d *fakeDisk) Free(string) (uint64, error) { return d.free.Load(), nil }

// syncLog is a log buffer safe for the service's goroutines.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestNoSpace: through the store's seam (a guard over a disk whose free
// space the test sets), a service below its free-space reserve refuses new
// turns, plain and streamed, with 507 naming the folder, the free space
// and the reserve, before anything runs; a turn whose commit finds the
// disk full ends 507 and leaves no half-written session; reads, event
// streams, the approvals listing and /metrics go on; /healthz says
// degraded and why (the folder and sizes only with the token); a log line
// and a metric mark the change; once space is back turns are taken again.
func TestNoSpace(t *testing.T) {
	disk := &fakeDisk{}
	disk.free.Store(30 * mib)
	log := &syncLog{}
	g, err := space.New(space.Options{Dir: "/srv/td", Reserve: 20 * mib, Floor: 4 * mib, Free: disk.Free,
		Logger: zerolog.New(log)})
	if err != nil {
		t.Fatal(err)
	}
	// fill "fills the disk" while it runs: the turn was admitted, its commit
	// finds no room.
	fill := toolkit.Tool{Name: "fill", Description: "Fills the disk.", Schema: []byte(`{"type":"object"}`), ReadOnly: true,
		Handler: func(context.Context, *toolkit.Call) (toolkit.Result, error) {
			disk.free.Store(1 * mib)
			return toolkit.Result{Content: "filled"}, nil
		}}
	f := newFixture(t, fixtureOpts{space: g, token: "tok", tools: []toolkit.Tool{fill}})
	calc := func(id string) map[string]any {
		return turn("r", "all", call(t, id, "calculate", map[string]string{"expression": "6*7+" + id[1:]}))
	}
	f.postTurn("s", calc("c1"))

	disk.free.Store(10 * mib)
	for _, stream := range []bool{false, true} {
		var h http.Header
		if stream {
			h = http.Header{"Accept": {"text/event-stream"}}
		}
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		resp, body := f.request(ctx, "POST", "/v1/sessions/s/turns", calc("c2"), h)
		cancel()
		if resp.StatusCode != http.StatusInsufficientStorage {
			t.Fatalf("a turn below the reserve (stream %v): %d %s, want 507", stream, resp.StatusCode, body)
		}
		for _, want := range []string{"/srv/td", "10 MiB free", "reserve of 20 MiB", "nothing ran"} {
			if !strings.Contains(string(body), want) {
				t.Errorf("the 507 does not say %q: %s", want, body)
			}
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Error("the 507 has no Retry-After")
		}
	}
	// Reads go on.
	if resp, body := f.do("GET", "/v1/sessions/s", nil); resp.StatusCode != 200 || strings.Count(string(body), `"tool_call_id":"c1"`) != 2 {
		t.Errorf("GET the session: %d %s, want its one turn", resp.StatusCode, body)
	}
	if resp, body := f.do("GET", "/v1/pending", nil); resp.StatusCode != 200 {
		t.Errorf("GET /v1/pending: %d %s", resp.StatusCode, body)
	}
	ev := f.openSSE("GET", "/v1/sessions/s/events", nil, "")
	ev.close()
	resp, body := f.do("GET", "/metrics", nil)
	for _, want := range []string{"tooldispatch_store_space_low 1", "tooldispatch_turns_refused_no_space_total 2",
		"tooldispatch_store_reserve_bytes 2.097152e+07", "tooldispatch_store_free_bytes 1.048576e+07"} {
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("/metrics (%d) has no %q", resp.StatusCode, want)
		}
	}
	// /healthz: the reason, with details only for the token's holder.
	resp, body = f.do("GET", "/healthz", nil)
	var h healthReply
	mustUnmarshal(t, body, &h)
	if resp.StatusCode != http.StatusServiceUnavailable || h.Status != "degraded" || !strings.Contains(h.Reason, "/srv/td has 10 MiB free") {
		t.Errorf("/healthz with the token: %d %s", resp.StatusCode, body)
	}
	plain, err := http.Get(f.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	h = healthReply{}
	_ = json.NewDecoder(plain.Body).Decode(&h)
	plain.Body.Close()
	if plain.StatusCode != http.StatusServiceUnavailable || h.Status != "degraded" || h.Reason == "" ||
		strings.Contains(h.Reason, "/srv/td") || strings.Contains(h.Reason, "MiB") {
		t.Errorf("/healthz without the token: %d %+v, want degraded with a reason naming no folder or size", plain.StatusCode, h)
	}
	if !strings.Contains(log.String(), "below its free-space reserve") {
		t.Errorf("no log line marks the change: %s", log)
	}

	// Space is back: turns are taken again.
	disk.free.Store(30 * mib)
	f.postTurn("s", calc("c3"))
	if resp, _ := f.do("GET", "/healthz", nil); resp.StatusCode != 200 {
		t.Errorf("/healthz once space is back: %d", resp.StatusCode)
	}
	if !strings.Contains(log.String(), "back above its free-space reserve") {
		t.Errorf("no log line marks the return: %s", log)
	}
	if _, body := f.do("GET", "/metrics", nil); !strings.Contains(string(body), "tooldispatch_store_space_low 0") {
		t.Error("/metrics: tooldispatch_store_space_low is not 0 once space is back")
	}

	// A turn admitted whose commit finds the disk full: 507, nothing of it
	// handed out; the next turn (space back) commits, and the interrupted
	// call reads outcome_unknown.
	resp, body = f.do("POST", "/v1/sessions/s/turns", turn("r", "all", call(t, "f1", "fill", map[string]any{})))
	if resp.StatusCode != http.StatusInsufficientStorage || !strings.Contains(string(body), "nothing of it was written") ||
		strings.Contains(string(body), `"messages"`) {
		t.Errorf("a turn whose commit found the disk full: %d %s, want 507 without messages", resp.StatusCode, body)
	}
	disk.free.Store(30 * mib)
	f.postTurn("s", calc("c4"))
	_, body = f.do("GET", "/v1/sessions/s", nil)
	var sess struct {
		Tools []toolMessage `json:"tools"`
	}
	mustUnmarshal(t, body, &sess)
	got := map[string]string{}
	for _, m := range sess.Tools {
		got[m.ToolCallID] = m.Status
	}
	if len(sess.Tools) != 4 || got["c1"] != "ok" || got["c3"] != "ok" || got["f1"] != "outcome_unknown" || got["c4"] != "ok" {
		t.Errorf("the session: %v, want c1, c3 ok, f1 outcome_unknown, c4 ok", got)
	}
}
