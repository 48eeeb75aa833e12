package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// drainGrace is the members' --grace in the drain tests.
const drainGrace = 10 * time.Second

// TestClusterMemberSIGTERM runs three members under a load of turns on
// twelve sessions (calls of 0–300 ms) and SIGTERMs one while a call runs
// on a session it owns: it answers new turns 503 naming the session's next
// owner, lets the running call finish (ok, its last line written), hands
// its sessions over and exits 143 without a panic; the load goes on on the others and every
// turn posted gets its result, each call run once, none outcome_unknown.
func TestClusterMemberSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	ws := t.TempDir()
	ms, ports := startClusterWith(t, 3, ws, clusterSetup{args: []string{"--grace", drainGrace.String()}})
	load := newClusterLoad(t, ms, ws, 12, "")
	load.script = func(i, k int) string { return fmt.Sprintf("; sleep 0.%d", (i+k)%4) }
	load.start()
	load.waitAnswered(30)

	// A session member 1 owns, with a slow call running on it.
	ctx := context.Background()
	session := ""
	for i := 0; session == ""; i++ {
		r, err := load.hist.postTurn(ctx, ms[0].http, fmt.Sprintf("slow-%d", i), "", commandCall(fmt.Sprintf("w%d", i), "true"))
		if err != nil {
			t.Fatal(err)
		}
		if ownerOf(t, ports, 3, r.Member) == 1 {
			session = fmt.Sprintf("slow-%d", i)
		}
	}
	// The slow call runs until the test releases it, so that the member
	// drains for as long as the test looks at it.
	slow := make(chan *turnReply, 1)
	go func() {
		r, err := load.hist.postTurn(ctx, ms[0].http, session, "slow", commandCall("slow",
			"echo slow-start >> slow.log; while [ ! -e release ]; do sleep 0.05; done; echo slow-end >> slow.log"))
		if err != nil {
			t.Errorf("the slow turn: %v", err)
		}
		slow <- r
	}()
	for !strings.Contains(readFile(filepath.Join(ws, "slow.log")), "slow-start") {
		time.Sleep(10 * time.Millisecond)
	}
	// While it drains, member 1 answers a new turn 503 naming the
	// session's next owner, another member.
	if err := ms[1].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signaled := time.Now()
	// Turns on another session of member 1 (a turn on the slow one would
	// queue behind its call): served until the signal lands, then 503.
	var refused *http.Response
	for k := 0; refused == nil; k++ {
		body := strings.NewReader(fmt.Sprintf(`{"run":"r","provider":"claude-code","auto_load_schemas":true,"message":{"role":"assistant",`+
			`"tool_calls":[{"id":"p%d","type":"function","function":{"name":"calculate","arguments":"{\"expression\":\"%d+1\"}"}}]}}`, k, k))
		op := load.hist.begin(0, session+"-probe", "", []string{fmt.Sprintf("p%d", k)})
		resp, err := http.Post(ms[1].http+"/v1/sessions/"+session+"-probe/turns", "application/json", body)
		if err != nil {
			op.end(0, nil, err)
			t.Fatalf("member 1 stopped answering before the slow call was released: %v", err)
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		op.end(resp.StatusCode, data, err)
		if resp.StatusCode == http.StatusServiceUnavailable {
			refused = resp
		}
	}
	if next := refused.Header.Get("Tooldispatch-Owner"); next == "" || next == ms[1].http || (next != ms[0].http && next != ms[2].http) {
		t.Errorf("the draining member named %q as the session's next owner, want member 0 or 2", next)
	}
	if err := os.WriteFile(filepath.Join(ws, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	code := waitExit(t, ms[1], drainGrace+15*time.Second)
	t.Logf("member 1 exited %d, %.2fs after SIGTERM (the running call released after %.2fs)", code, time.Since(signaled).Seconds(), released.Sub(signaled).Seconds())
	if code != 143 || strings.Contains(ms[1].log.String(), "panic") {
		t.Errorf("member 1 exited %d after SIGTERM, want 143 and no panic:\n%s", code, ms[1].log)
	}
	if r := <-slow; r == nil || len(r.Messages) != 1 || r.Messages[0].Status != "ok" {
		t.Errorf("the call running at SIGTERM: %+v, want ok", r)
	}
	if got := readFile(filepath.Join(ws, "slow.log")); got != "slow-start\nslow-end\n" {
		t.Errorf("slow.log %q: the running call did not finish", got)
	}
	load.waitAnswered(30)
	load.finish()
	f := load.check(false)
	t.Logf("turns posted %d, answered %d (replayed %d), attempts sent again %d, executions %d, outcome_unknown %d, lost %d, double %d",
		f.posted, f.answered, f.replayed, f.retried, f.executions, f.unknown, f.lost, f.double)
	t.Logf("member 1's log:\n%s", ms[1].log)
}

// TestClusterMemberSIGTERMGraceEnds SIGTERMs a member (--grace 1s) while a
// 30-second call runs on a session it owns: at the end of the grace the
// call is canceled and its turn answers canceled (committed, not lost),
// and the member exits 143; the session's next turn is served by the
// other member.
func TestClusterMemberSIGTERMGraceEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	ws := t.TempDir()
	ms, ports := startClusterWith(t, 2, ws, clusterSetup{args: []string{"--grace", "1s"}})
	h := newHistory(t, ms[0].logs)
	ctx := context.Background()
	session, owner := "", 0
	for i := 0; session == ""; i++ {
		r, err := h.postTurn(ctx, ms[0].http, fmt.Sprintf("long-%d", i), "", commandCall(fmt.Sprintf("w%d", i), "true"))
		if err != nil {
			t.Fatal(err)
		}
		if owner = ownerOf(t, ports, 2, r.Member); owner == 1 {
			session = fmt.Sprintf("long-%d", i)
		}
	}
	long := make(chan *turnReply, 1)
	go func() {
		r, err := h.postTurn(ctx, ms[0].http, session, "long", commandCall("long", "echo long-start >> long.log; sleep 30; echo long-end >> long.log"))
		if err != nil {
			t.Errorf("the long turn: %v", err)
		}
		long <- r
	}()
	for !strings.Contains(readFile(filepath.Join(ws, "long.log")), "long-start") {
		time.Sleep(10 * time.Millisecond)
	}
	code, took := stopMember(t, ms[1], syscall.SIGTERM, 20*time.Second)
	t.Logf("member 1 exited %d, %.2fs after SIGTERM (grace 1s)", code, took.Seconds())
	if code != 143 {
		t.Errorf("exit %d, want 143:\n%s", code, ms[1].log)
	}
	r := <-long
	if r == nil || len(r.Messages) != 1 || r.Messages[0].Status != "canceled" {
		t.Fatalf("the call running past the grace: %+v, want canceled", r)
	}
	next, err := h.postTurn(ctx, ms[0].http, session, "after", commandCall("after", "echo after"))
	if err != nil || next.Messages[0].Status != "ok" || ownerOf(t, ports, 2, next.Member) != 0 {
		t.Fatalf("the next turn: %+v %v, want ok on member 0", next, err)
	}
	got := storedStatuses(t, ms[0].http, session)
	if got["long"] != "canceled" || got["after"] != "ok" {
		t.Errorf("stored: %v, want long canceled and after ok", got)
	}
	h.check(ms, http.DefaultClient)
}

// TestClusterRollingRestart runs three members under a load of turns on
// 24 sessions (calls of 0–300 ms, sent through the Go client, which sends
// a turn again with its turn_id when a connection broke or a draining
// member answered 503) and restarts each member in turn: SIGTERM, exit
// 143, start again, serve. Every turn posted gets its result: none lost,
// none outcome_unknown, each call run once and committed once.
func TestClusterRollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	ws := t.TempDir()
	ms, _ := startClusterWith(t, 3, ws, clusterSetup{args: []string{"--grace", drainGrace.String()}})
	load := newClusterLoad(t, ms, ws, 24, "")
	load.script = func(i, k int) string { return fmt.Sprintf("; sleep 0.%d", (i+k)%4) }
	load.start()
	load.waitAnswered(40)
	for i, m := range ms {
		code, took := stopMember(t, m, syscall.SIGTERM, drainGrace+15*time.Second)
		if code != 143 || strings.Contains(m.log.String(), "panic") {
			t.Errorf("member %d exited %d after SIGTERM, want 143:\n%s", i, code, m.log)
		}
		restartMember(t, m)
		start := time.Now()
		for {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := load.hist.post(cctx, http.DefaultClient, m.http, fmt.Sprintf("back-%d", i), "", commandCall(fmt.Sprintf("back-%d", i), "true"))
			cancel()
			if err == nil {
				break
			}
			if time.Since(start) > 60*time.Second {
				t.Fatalf("member %d never served after its restart: %v\n%s", i, err, m.log)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("member %d: drained and exited %d in %.2fs, serving again %.2fs after its restart", i, code, took.Seconds(), time.Since(start).Seconds())
		load.waitAnswered(40)
	}
	load.finish()
	f := load.check(false)
	t.Logf("rolling restart of 3 members under load: turns posted %d, answered %d (replayed %d), attempts sent again %d, "+
		"executions %d, outcome_unknown %d, lost %d, double executions %d",
		f.posted, f.answered, f.replayed, f.retried, f.executions, f.unknown, f.lost, f.double)
}
