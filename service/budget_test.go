package service

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// holdTool is a read-only tool that stays in its call until release is
// closed, telling entered each time a call starts: turns that call it stay
// in flight as long as the test wants.
func holdTool(entered chan<- string, release <-chan struct{}) toolkit.Tool {
	return toolkit.Tool{Name: "hold", Description: "Waits until released.", Concurrent: true, ReadOnly: true, NoDedup: true,
		Schema: []byte(`{"type":"object","properties":{"pad":{"type":"string"}},"additionalProperties":false}`),
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			entered <- c.Session
			select {
			case <-release:
				return toolkit.Result{Content: "released"}, nil
			case <-ctx.Done():
				return toolkit.Result{}, ctx.Err()
			}
		}}
}

// bigTurn is a request body of about size bytes: one hold call whose
// argument is padding.
func bigTurn(t *testing.T, size int) []byte {
	t.Helper()
	body, err := json.Marshal(turn("r1", "all", call(t, "h1", "hold", map[string]any{"pad": strings.Repeat("x", size)})))
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// postRaw posts body to session's turns; chunked sends it without a
// Content-Length.
func (f *fixture) postRaw(ctx context.Context, session string, body []byte, chunked bool) (*http.Response, []byte, error) {
	var rd io.Reader = bytes.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd) // not a *bytes.Reader: no Content-Length
	}
	req, err := http.NewRequestWithContext(ctx, "POST", f.url+"/v1/sessions/"+session+"/turns", rd)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// TestInFlightBudget: the bytes of turns in flight have a budget (by
// default twice the body limit). Eight concurrent turns of about 1 MiB
// each against a 1.1 MiB body limit: two are admitted and held in their
// tool; the six others are refused at once with 429 and Retry-After, before
// anything runs. Once the two end, a turn is admitted again. Counted, not
// timed.
func TestInFlightBudget(t *testing.T) {
	entered, release := make(chan string, 16), make(chan struct{})
	const size = 1 << 20
	f := newFixture(t, fixtureOpts{maxBody: size + 100<<10, tools: []toolkit.Tool{holdTool(entered, release)}})
	body := bigTurn(t, size-1024) // within the 1 MiB of one call's arguments
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	type result struct {
		code  int
		retry string
		body  string
		err   error
	}
	const n = 8
	results := make(chan result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, b, err := f.postRaw(ctx, "budget-"+string(rune('a'+i)), body, i%2 == 1)
			r := result{body: string(b), err: err}
			if resp != nil {
				r.code, r.retry = resp.StatusCode, resp.Header.Get("Retry-After")
			}
			results <- r
		}()
	}
	defer wg.Wait()
	defer close(release)
	admitted, refused := 0, 0
	for admitted < 2 || refused < n-2 {
		select {
		case <-entered:
			admitted++
			if admitted > 2 {
				t.Fatalf("%d turns of %d bytes are in flight at once, more than the budget of twice the %d-byte body limit", admitted, len(body), size+100<<10)
			}
		case r := <-results:
			if r.err != nil || r.code != http.StatusTooManyRequests || r.retry == "" || !strings.Contains(r.body, "in flight") {
				t.Fatalf("a turn over the budget: %d Retry-After %q %s %v", r.code, r.retry, r.body, r.err)
			}
			refused++
		case <-ctx.Done():
			t.Fatalf("admitted %d, refused %d", admitted, refused)
		}
	}
	release <- struct{}{}
	release <- struct{}{}
	for range 2 {
		if r := <-results; r.code != http.StatusOK {
			t.Errorf("an admitted turn: %d %s", r.code, r.body)
		}
	}
	// The budget is free again.
	go func() { release <- struct{}{} }()
	resp, b, err := f.postRaw(ctx, "budget-after", body, false)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("a turn after the budget was freed: %v %s", err, b)
	}
	<-entered
}

// TestOverBudgetAnswerReachesClientsThatSendFirst: a client that writes its
// whole request before it reads the answer (as many simple clients do) gets
// the 429 of a turn over the budget, not a connection reset: the refused
// body is read and dropped, never held. Bodies of 8 MiB, more than the
// socket buffers take.
func TestOverBudgetAnswerReachesClientsThatSendFirst(t *testing.T) {
	entered, release := make(chan string, 4), make(chan struct{})
	const size = 8 << 20
	f := newFixture(t, fixtureOpts{maxBody: size + 100<<10, tools: []toolkit.Tool{holdTool(entered, release)}})
	tr := turn("r1", "all", call(t, "h1", "hold", map[string]any{}))
	tr["message"].(map[string]any)["content"] = strings.Repeat("y", size)
	body, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _ = f.postRaw(ctx, fmt.Sprint("held-", i), body, false)
		}()
		<-entered
	}
	if status := sendAllThenRead(t, f.hs.Listener.Addr().String(), mountPrefix+"/v1/sessions/raw/turns", body); !strings.HasPrefix(status, "HTTP/1.1 429 ") {
		t.Errorf("a client that sends everything first read %q, want a 429", status)
	}
}

// sendAllThenRead writes a whole POST of body to addr, then reads the
// status line of the answer, as simple clients do.
func sendAllThenRead(t *testing.T, addr, path string, body []byte) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, len(body))
	if _, err := conn.Write(append([]byte(head), body...)); err != nil {
		return "write: " + err.Error()
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "read: " + err.Error()
	}
	return line
}

// TestAnswersAreNotRefusedForTurnsInFlight: with the in-flight budget full
// to the byte with turns, a person's confirmation and answer still get
// through: turns waiting for them must not starve them.
func TestAnswersAreNotRefusedForTurnsInFlight(t *testing.T) {
	entered, release := make(chan string, 4), make(chan struct{})
	body := bigTurn(t, 64<<10)
	f := newFixture(t, fixtureOpts{maxBody: int64(len(body)), tools: []toolkit.Tool{holdTool(entered, release)}})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(release)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _ = f.postRaw(ctx, fmt.Sprint("full-", i), body, false)
		}()
		<-entered
	}
	if resp, b, err := f.postRaw(ctx, "full-2", body, false); err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the budget is not full: a third turn got %v %s", err, b)
	}
	for path, body := range map[string]any{
		"/v1/sessions/full-0/confirm/h1": map[string]any{"approve": true, "args_hash": "0000"},
		"/v1/sessions/full-0/answer/h1":  map[string]any{"text": "yes"},
	} {
		resp, b := f.do("POST", path, body)
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusBadRequest {
			t.Errorf("POST %s: %d %s", path, resp.StatusCode, b)
		}
	}
}
