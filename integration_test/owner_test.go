package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/service"
	"github.com/tooldispatch/tooldispatch/service/client"
)

// ownerClient is an HTTP client of the test process that returns
// redirects instead of following them and closes its connections at the
// end of the test.
func ownerClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// rawTurn posts a turn and returns the response (body read) without
// following a redirect.
func rawTurn(t *testing.T, hc *http.Client, url, turnID string, calls ...map[string]any) (*http.Response, *turnReply) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"run": "r", "provider": "claude-code", "auto_load_schemas": true, "approve": "all",
		"turn_id": turnID, "message": map[string]any{"role": "assistant", "tool_calls": calls}})
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var r turnReply
	_ = json.Unmarshal(data, &r)
	return resp, &r
}

var forwardedLine = regexp.MustCompile(`(?m)^tooldispatch_cluster_forwarded_total (\S+)$`)

// forwarded reads a member's tooldispatch_cluster_forwarded_total.
func forwarded(t *testing.T, hc *http.Client, m *member) int {
	t.Helper()
	resp, err := hc.Get(m.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	match := forwardedLine.FindSubmatch(data)
	if match == nil {
		t.Fatalf("%s/metrics has no tooldispatch_cluster_forwarded_total", m.http)
	}
	n, err := strconv.ParseFloat(string(match[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func forwardedAll(t *testing.T, hc *http.Client, ms []*member) []int {
	var out []int
	for _, m := range ms {
		out = append(out, forwarded(t, hc, m))
	}
	return out
}

func calcCall(id string) map[string]any {
	return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "calculate", "arguments": `{"expression":"6*7"}`}}
}

// owners finds the owner (index into ms) of each session from the member
// its first turn ran on.
func owners(t *testing.T, hc *http.Client, ms []*member, ports []int, sessions []string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, s := range sessions {
		resp, r := rawTurn(t, hc, ms[0].http+"/v1/sessions/"+s+"/turns", s+"-first", calcCall("c0"))
		for resp.StatusCode == http.StatusTemporaryRedirect {
			resp, r = rawTurn(t, hc, resp.Header.Get("Location"), s+"-first", calcCall("c0"))
		}
		if resp.StatusCode != http.StatusOK || r.Member == "" {
			t.Fatalf("first turn of %s: %d %+v", s, resp.StatusCode, r)
		}
		out[s] = ownerOf(t, ports, len(ms), r.Member)
	}
	return out
}

// TestClusterOwnerHeader: every member names a session's owner in the
// Tooldispatch-Owner header of its answers, the owner included; a
// non-owner forwards the request (counted in
// tooldispatch_cluster_forwarded_total), the owner does not; and the Go
// client, told of one member only, learns the owners and sends each
// session's turns there, so no member forwards them any more.
func TestClusterOwnerHeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	ms, ports := startCluster(t, 3, t.TempDir())
	hc := ownerClient(t)
	sessions := []string{"oh-a", "oh-b", "oh-c", "oh-d", "oh-e", "oh-f"}
	own := owners(t, hc, ms, ports, sessions)
	for _, s := range sessions {
		want := ms[own[s]].http
		for i, m := range ms {
			before := forwarded(t, hc, m)
			resp, r := rawTurn(t, hc, m.http+"/v1/sessions/"+s+"/turns", fmt.Sprintf("%s-%d", s, i), calcCall(fmt.Sprintf("c1-%d", i)))
			if resp.StatusCode != http.StatusOK || !served(r.Messages[0].Status) {
				t.Fatalf("%s on member %d: %d %+v", s, i, resp.StatusCode, r)
			}
			if got := resp.Header.Get(service.OwnerHeader); got != want {
				t.Errorf("%s on member %d: %s = %q, want %q (member %d)", s, i, service.OwnerHeader, got, want, own[s])
			}
			after := forwarded(t, hc, m)
			switch {
			case i == own[s] && after != before:
				t.Errorf("%s on its owner %d: forwarded %d → %d, want no hop", s, i, before, after)
			case i != own[s] && after <= before:
				t.Errorf("%s on member %d (owner %d): forwarded %d → %d, want a hop", s, i, own[s], before, after)
			}
		}
		// Reading the session names the owner too.
		resp, err := hc.Get(ms[(own[s]+1)%3].http + "/v1/sessions/" + s)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get(service.OwnerHeader); got != want {
			t.Errorf("GET %s: %s = %q, want %q", s, service.OwnerHeader, got, want)
		}
	}

	// The client knows one member; after one answer per session it talks
	// to the owners only.
	c, err := client.New(client.Options{Members: []string{ms[0].http}, HTTP: hc})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, s := range sessions {
		if res, err := c.Turn(ctx, s, turnBody(s+"-learn", calcCall("c2"))); err != nil || res.Status != http.StatusOK {
			t.Fatalf("client turn on %s: %+v %v", s, res, err)
		}
		if got := c.Owner(s); got != ms[own[s]].http {
			t.Errorf("client's owner of %s = %q, want %q", s, got, ms[own[s]].http)
		}
	}
	before := forwardedAll(t, hc, ms)
	const rounds = 5
	for k := 0; k < rounds; k++ {
		for _, s := range sessions {
			res, err := c.Turn(ctx, s, turnBody(fmt.Sprintf("%s-c%d", s, k), calcCall(fmt.Sprintf("c3-%d", k))))
			if err != nil || res.Status != http.StatusOK {
				t.Fatalf("client turn on %s: %+v %v", s, res, err)
			}
			if res.Member != ms[own[s]].http {
				t.Errorf("client sent %s to %s, not its owner %s", s, res.Member, ms[own[s]].http)
			}
		}
	}
	after := forwardedAll(t, hc, ms)
	for i := range ms {
		if after[i] != before[i] {
			t.Errorf("member %d forwarded %d requests of the client's %d turns, want none", i, after[i]-before[i], rounds*len(sessions))
		}
	}
	t.Logf("client: %+v; forwarded per member %v → %v", c.Stats(), before, after)
}

// served reports whether a call's status says it was answered (calculate's
// repeated calls are answered from the session's cache).
func served(status string) bool { return status == "ok" || status == "deduped" }

func turnBody(turnID string, calls ...map[string]any) map[string]any {
	return map[string]any{"run": "r", "provider": "claude-code", "auto_load_schemas": true, "approve": "all",
		"turn_id": turnID, "message": map[string]any{"role": "assistant", "tool_calls": calls}}
}

// TestClusterOwnerRedirect: with [cluster] redirect = true, a member answers a turn for a
// session another member owns with 307 to the owner and runs nothing; a
// request a member already redirected is served wherever it lands (here:
// sent back to the non-owner, as if the owner had changed in between),
// never redirected again; the Go client follows the redirect, remembers
// the owner and from then on no member forwards or redirects.
func TestClusterOwnerRedirect(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	ws := t.TempDir()
	conf := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(conf, []byte("[cluster]\nredirect = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ms, ports := startClusterWith(t, 2, ws, clusterSetup{config: conf})
	hc := ownerClient(t)
	sessions := []string{"rd-a", "rd-b", "rd-c", "rd-d"}
	own := owners(t, hc, ms, ports, sessions)
	for _, s := range sessions {
		other := ms[1-own[s]]
		before := forwardedAll(t, hc, ms)
		resp, _ := rawTurn(t, hc, other.http+"/v1/sessions/"+s+"/turns", s+"-r1", commandCall(s+"-r1", "echo "+s+"-r1 >> ran.log"))
		if resp.StatusCode != http.StatusTemporaryRedirect {
			t.Fatalf("%s on its non-owner: %d, want 307", s, resp.StatusCode)
		}
		loc := resp.Header.Get("Location")
		if want := ms[own[s]].http + "/v1/sessions/" + s + "/turns?" + service.RedirectedParam + "=1"; loc != want {
			t.Errorf("Location = %q, want %q", loc, want)
		}
		if strings.Contains(readFile(filepath.Join(ws, "ran.log")), s+"-r1") {
			t.Errorf("the redirected turn of %s ran on the non-owner", s)
		}
		// The owner serves the redirected request.
		resp, r := rawTurn(t, hc, loc, s+"-r1", commandCall(s+"-r1", "echo "+s+"-r1 >> ran.log"))
		if resp.StatusCode != http.StatusOK || r.Messages[0].Status != "ok" {
			t.Fatalf("%s at the owner: %d %+v", s, resp.StatusCode, r)
		}
		// A redirected request that reaches a member not owning the session
		// (a stale owner) is served there, through the cluster.
		stale := strings.Replace(loc, ms[own[s]].http, other.http, 1)
		resp, r = rawTurn(t, hc, stale, s+"-r2", commandCall(s+"-r2", "echo "+s+"-r2 >> ran.log"))
		if resp.StatusCode != http.StatusOK || r.Messages[0].Status != "ok" {
			t.Fatalf("%s redirected to a stale owner: %d %+v, want served", s, resp.StatusCode, r)
		}
		after := forwardedAll(t, hc, ms)
		if after[own[s]] != before[own[s]] || after[1-own[s]] <= before[1-own[s]] {
			t.Errorf("%s: forwarded %v → %v, want only the stale member's one hop", s, before, after)
		}
	}
	if ran := strings.Fields(readFile(filepath.Join(ws, "ran.log"))); len(ran) != 2*len(sessions) {
		t.Errorf("executions %v, want each call once", ran)
	}

	c, err := client.New(client.Options{Members: []string{ms[0].http, ms[1].http}, HTTP: hc})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before := forwardedAll(t, hc, ms)
	for k := 0; k < 3; k++ {
		for _, s := range sessions {
			res, err := c.Turn(ctx, s, turnBody(fmt.Sprintf("%s-c%d", s, k), calcCall(fmt.Sprintf("c-%d", k))))
			if err != nil || res.Status != http.StatusOK {
				t.Fatalf("client turn on %s: %+v %v", s, res, err)
			}
			if res.Member != ms[own[s]].http {
				t.Errorf("client's turn on %s answered by %s, not the owner %s", s, res.Member, ms[own[s]].http)
			}
		}
	}
	after := forwardedAll(t, hc, ms)
	for i := range ms {
		if after[i] != before[i] {
			t.Errorf("member %d forwarded %d of the client's requests in redirect mode", i, after[i]-before[i])
		}
	}
	if st := c.Stats(); st.Redirects > uint64(len(sessions)) {
		t.Errorf("client followed %d redirects for %d sessions, want at most one each", st.Redirects, len(sessions))
	}
	t.Logf("client: %+v", c.Stats())
}

// TestClusterClientOwnerDies: the client talks to a session's owner; the
// owner is SIGKILLed; the client's next turn finds the owner unreachable,
// falls back to a survivor, and once the cluster has moved the session
// learns the new owner from the answer. The turn runs once.
// ownerConvergence bounds how long survivors may name different owners
// after a member died: each drops it at its own next liveness check.
const ownerConvergence = 3 * time.Second

func TestClusterClientOwnerDies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	ws := t.TempDir()
	ms, ports := startCluster(t, 3, ws)
	h := newHistory(t, ms[0].logs)
	hc := ownerClient(t)
	first, err := h.post(context.Background(), hc, ms[0].http, "dies", "dies-first", calcCall("c0"))
	if err != nil || first.Member == "" {
		t.Fatalf("first turn of dies: %+v %v", first, err)
	}
	own := ownerOf(t, ports, len(ms), first.Member)
	var urls []string
	for _, m := range ms {
		urls = append(urls, m.http)
	}
	c, err := client.New(client.Options{Members: urls, HTTP: hc})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := h.turn(ctx, c, "dies", turnBody("d1", commandCall("d1", "echo d1 >> ran.log")))
	if err != nil || res.Status != http.StatusOK || c.Owner("dies") != ms[own].http {
		t.Fatalf("first client turn: %+v %v, owner %q want %q", res, err, c.Owner("dies"), ms[own].http)
	}
	if err := ms[own].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = ms[own].cmd.Wait()
	killed := time.Now()
	for {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err = h.turn(cctx, c, "dies", turnBody("d2", commandCall("d2", "echo d2 >> ran.log")))
		cancel()
		if err == nil && res.Status == http.StatusOK {
			break
		}
		if err == nil {
			t.Logf("after the death: %d from %s (owner named: %q): %s", res.Status, res.Member, res.Owner, res.Body)
		} else {
			t.Logf("after the death: %v", err)
		}
		if time.Since(killed) > 40*time.Second {
			t.Fatalf("the client never got the session served after its owner died: %+v %v", res, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("served %.2fs after the owner died by %s (owner named: %q); client %+v", time.Since(killed).Seconds(), res.Member, res.Owner, c.Stats())
	if st := c.Stats(); st.Fallbacks == 0 {
		t.Error("the client never fell back from the dead owner")
	}
	newOwner := c.Owner("dies")
	if newOwner == ms[own].http || newOwner == "" {
		t.Errorf("client's owner after the death = %q (the dead one was %q)", newOwner, ms[own].http)
	}
	// Each survivor learns of the death on its own (its next liveness
	// check, every 200 ms, or a broken connection), so the first answer may
	// come before the other survivor has dropped the dead member: their
	// owner headers agree once both have, within a few checks.
	for i, m := range ms {
		if i == own {
			continue
		}
		var got string
		for deadline := time.Now().Add(ownerConvergence); ; time.Sleep(50 * time.Millisecond) {
			resp, err := hc.Get(m.http + "/v1/sessions/dies")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got = resp.Header.Get(service.OwnerHeader); got == newOwner || time.Now().After(deadline) {
				break
			}
		}
		if got != newOwner {
			t.Errorf("survivor %d names %q as the owner %v after the death, the client %q", i, got, ownerConvergence, newOwner)
		}
	}
	// The next turn goes straight to the new owner.
	res, err = h.turn(ctx, c, "dies", turnBody("d3", commandCall("d3", "echo d3 >> ran.log")))
	if err != nil || res.Status != http.StatusOK || res.Member != newOwner {
		t.Errorf("turn after the move: %+v %v, want it served by %s", res, err, newOwner)
	}
	if ran := strings.Fields(readFile(filepath.Join(ws, "ran.log"))); strings.Join(ran, " ") != "d1 d2 d3" {
		t.Errorf("executions %v, want d1 d2 d3 once each", ran)
	}
	h.check(ms, hc)
}
