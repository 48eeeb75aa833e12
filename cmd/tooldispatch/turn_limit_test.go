package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// padArgs is the arguments text of n bytes {"pad":"xxx…"} (n at least 10).
func padArgs(n int) map[string]any {
	return map[string]any{"pad": strings.Repeat("x", n-len(`{"pad":""}`))}
}

// limitTurn is a turn of calls of a tool no one has, whose arguments total
// sizes; extra pads the envelope's content.
func limitTurn(sizes []int, extra int) string {
	var calls []string
	for i, n := range sizes {
		calls = append(calls, anyCall(fmt.Sprintf("c%d", i), "no_such_tool", padArgs(n)))
	}
	return fmt.Sprintf(`{"provider":"claude-code","message":{"role":"assistant","content":%q,"tool_calls":[%s]}}`,
		strings.Repeat("y", extra), strings.Join(calls, ","))
}

// TestTurnLimitOnEveryRoute: [dispatcher] max_turn_bytes is one limit for
// run input and the service (and the Go API and cluster members, tested in
// actors and integration_test): a turn whose arguments total exactly the
// limit is dispatched; one byte more is refused before anything runs, with
// the same message; a turn whose JSON is larger than the limit plus 1 MiB
// is refused before it is decoded.
func TestTurnLimitOnEveryRoute(t *testing.T) {
	const limit = 2 << 20
	config := writeConfig(t, fmt.Sprintf("[dispatcher]\nmax_turn_bytes = %d\n", limit))
	within := limitTurn([]int{1 << 20, 1 << 20}, 0)        // exactly the limit
	over := limitTurn([]int{1 << 20, 1 << 20, 10}, 0)      // 10 bytes more
	tooBig := limitTurn([]int{1 << 10}, limit+1<<20-1<<10) // small arguments, a body over the limit plus 1 MiB
	const refusal = "the turn's arguments total 2097162 bytes, more than the 2097152 a turn may carry; nothing ran"

	t.Run("run", func(t *testing.T) {
		args := []string{"--workspace", t.TempDir(), "--data", t.TempDir(), "--config", config, "--events=false", "-"}
		e, stdout, stderr := testEnv(strings.NewReader(within))
		if code, out := runInProcess(t, e, stdout, stderr, args...); code != exitOK || len(out.results) != 2 || out.results[1].Status != "unknown_tool" {
			t.Errorf("a turn at the limit: exit %d %+v\n%s", code, out.results, stderr.String())
		}
		for _, c := range []struct{ input, want string }{{over, refusal}, {tooBig, "the turn is larger than 3145728 bytes"}} {
			e, stdout, stderr := testEnv(strings.NewReader(c.input))
			code, out := runInProcess(t, e, stdout, stderr, args...)
			if code != exitInput || len(out.results) != 0 || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("exit %d, %d results, stderr:\n%s\nwant exit %d and %q", code, len(out.results), stderr.String(), exitInput, c.want)
			}
		}
	})
	t.Run("serve", func(t *testing.T) {
		s := startServe(t, "--workspace", t.TempDir(), "--data", t.TempDir(), "--config", config)
		post := func(body string) (int, string) {
			resp, err := http.Post(s.base+"/v1/sessions/limit/turns", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		if code, body := post(within); code != http.StatusOK || strings.Count(body, `"status":"unknown_tool"`) != 2 {
			t.Errorf("a turn at the limit: %d %.300s", code, body)
		}
		if code, body := post(over); code != http.StatusBadRequest || !strings.Contains(body, refusal) {
			t.Errorf("a turn over the limit: %d %.300s", code, body)
		}
		if code, body := post(tooBig); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "larger than 3145728 bytes") {
			t.Errorf("a body over the limit plus 1 MiB: %d %.300s", code, body)
		}
	})
}

// TestServeInFlightBudget: [service] max_inflight_bytes, through serve. A
// turn of 1.5 MiB waits in ask_user; a second one of 1.5 MiB does not fit
// beside it in a budget of 2.5 MiB and is refused at once, 429 with
// Retry-After; once the first is answered, the second is admitted.
func TestServeInFlightBudget(t *testing.T) {
	config := writeConfig(t, "[dispatcher]\nmax_turn_bytes = 1048576\n[service]\nmax_inflight_bytes = 2621440\n")
	s := startServe(t, "--workspace", t.TempDir(), "--data", t.TempDir(), "--config", config)
	pad := strings.Repeat("y", 1536<<10)
	ask := fmt.Sprintf(`{"provider":"claude-code","auto_load_schemas":true,"message":{"role":"assistant","content":%q,"tool_calls":[%s]}}`,
		pad, anyCall("q1", "ask_user", map[string]any{"question": "go on?"}))
	second := fmt.Sprintf(`{"provider":"claude-code","message":{"role":"assistant","content":%q,"tool_calls":[%s]}}`,
		pad, anyCall("r1", "no_such_tool", map[string]any{}))

	req, err := http.NewRequest("GET", s.base+"/v1/sessions/held/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	events, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Body.Close()
	first := make(chan int, 1)
	go func() {
		resp, err := http.Post(s.base+"/v1/sessions/held/turns", "application/json", strings.NewReader(ask))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	sc := bufio.NewScanner(events.Body)
	for sc.Text() != "event: tool_call_start" {
		if !sc.Scan() {
			t.Fatalf("the event stream ended before ask_user started: %v", sc.Err())
		}
	}
	resp, err := http.Post(s.base+"/v1/sessions/other/turns", "application/json", strings.NewReader(second))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "in flight") {
		t.Errorf("a turn over the budget: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	ans, err := http.Post(s.base+"/v1/sessions/held/answer/q1", "application/json", strings.NewReader(`{"text":"yes"}`))
	if err != nil {
		t.Fatal(err)
	}
	ans.Body.Close()
	if code := <-first; code != http.StatusOK {
		t.Errorf("the held turn: %d", code)
	}
	resp, err = http.Post(s.base+"/v1/sessions/other/turns", "application/json", strings.NewReader(second))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the second turn once the first ended: %d", resp.StatusCode)
	}
}
