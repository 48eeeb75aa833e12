package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Bounds of the load test.
const (
	loadClients        = 100
	loadDefaultSeconds = 10
	loadShortSeconds   = 2
	// loadMaxTurns bounds the turns one client posts, whatever the duration.
	loadMaxTurns = 2000
)

// loadDuration is how long the load test runs: TOOLDISPATCH_LOAD_SECONDS,
// else 10 s, or 2 s with -short.
func loadDuration(t *testing.T) time.Duration {
	if v := os.Getenv("TOOLDISPATCH_LOAD_SECONDS"); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n <= 0 {
			t.Fatalf("TOOLDISPATCH_LOAD_SECONDS=%q: want a positive number of seconds", v)
		}
		return time.Duration(n * float64(time.Second))
	}
	if testing.Short() {
		return loadShortSeconds * time.Second
	}
	return loadDefaultSeconds * time.Second
}

// loadClientResult is what one load client did.
type loadClientResult struct {
	session   string
	ok        int
	failures  []string
	latencies []time.Duration
}

// TestLoad: 100 clients on distinct sessions post small turns for a while;
// no request fails, and every call of every turn has a committed result.
func TestLoad(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	tr := &http.Transport{MaxIdleConns: 2 * loadClients, MaxIdleConnsPerHost: 2 * loadClients, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: testTimeout}

	d := loadDuration(t)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	results := make([]loadClientResult, loadClients)
	var wg sync.WaitGroup
	began := time.Now()
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runLoadClient(ctx, client, f.url, fmt.Sprintf("load-%03d", i))
		}()
	}
	wg.Wait()
	elapsed := time.Since(began)

	var all []time.Duration
	total := 0
	for _, r := range results {
		for _, msg := range r.failures {
			t.Errorf("%s: %s", r.session, msg)
		}
		total += r.ok
		all = append(all, r.latencies...)
		// Every turn the client got a reply for is committed, with a
		// result for each of its calls.
		turns, err := f.store.Turns(t.Context(), r.session)
		if err != nil {
			t.Fatalf("reading %s: %v", r.session, err)
		}
		if len(turns) != r.ok {
			t.Errorf("%s: %d turns committed, %d replies received", r.session, len(turns), r.ok)
		}
		for _, tr := range turns {
			msgs := tr.GetToolMessages()
			if len(msgs) != len(tr.GetAssistant().GetToolCalls()) {
				t.Errorf("%s turn %d: %d results for %d calls", r.session, tr.GetTurn(), len(msgs), len(tr.GetAssistant().GetToolCalls()))
			}
			for _, m := range msgs {
				if m.GetStatus() != "ok" && m.GetStatus() != "deduped" {
					t.Errorf("%s turn %d call %s: status %s", r.session, tr.GetTurn(), m.GetToolCallId(), m.GetStatus())
				}
			}
		}
	}
	if total == 0 {
		t.Fatal("no turn completed")
	}
	slices.Sort(all)
	p50 := all[len(all)/2]
	p99 := all[min(len(all)-1, len(all)*99/100)]
	t.Logf("load: %d clients, %v: %d turns (%d calls), %.0f requests/s, latency p50 %v, p99 %v, max %v",
		loadClients, elapsed.Round(time.Millisecond), total, 2*total, float64(total)/elapsed.Seconds(),
		p50.Round(time.Microsecond), p99.Round(time.Microsecond), all[len(all)-1].Round(time.Microsecond))
}

// runLoadClient posts turns of two calls (calculate and read_files, both
// read-only) on its own session until ctx ends.
func runLoadClient(ctx context.Context, client *http.Client, base, session string) loadClientResult {
	res := loadClientResult{session: session}
	for i := 0; i < loadMaxTurns && ctx.Err() == nil; i++ {
		args, _ := json.Marshal(map[string]any{"expression": fmt.Sprintf("%d * %d", i, i+1)})
		body, _ := json.Marshal(turn("r1", "all",
			map[string]any{"id": "calc", "type": "function", "function": map[string]any{"name": "calculate", "arguments": string(args)}},
			map[string]any{"id": "read", "type": "function", "function": map[string]any{"name": "read_files", "arguments": `{"paths":["notes.md"]}`}},
		))
		req, err := http.NewRequest("POST", base+"/v1/sessions/"+session+"/turns", bytes.NewReader(body))
		if err != nil {
			res.failures = append(res.failures, err.Error())
			return res
		}
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			res.failures = append(res.failures, fmt.Sprintf("turn %d: %v", i, err))
			continue
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		res.latencies = append(res.latencies, time.Since(start))
		if err != nil || resp.StatusCode != http.StatusOK {
			res.failures = append(res.failures, fmt.Sprintf("turn %d: %d %s %v", i, resp.StatusCode, data, err))
			continue
		}
		var r turnReply
		if err := json.Unmarshal(data, &r); err != nil || len(r.Messages) != 2 || r.Messages[0].Content != strconv.Itoa(i*(i+1)) {
			res.failures = append(res.failures, fmt.Sprintf("turn %d: reply %s", i, data))
			continue
		}
		res.ok++
	}
	return res
}
