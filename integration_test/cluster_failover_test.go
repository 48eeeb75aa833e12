package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClusterFailover SIGKILLs the member owning a session, idle or in the
// middle of a call (alternately), and measures how long after the kill a
// survivor serves the session's next turn; the killed member is started
// again before the next kill. Every kill must leave the session whole: the
// next turn ok, an interrupted call outcome_unknown, nothing run twice.
// Twice per membership by default; TOOLDISPATCH_FAILOVER_RUNS=N makes N
// kills per membership (the figures in docs/RELIABILITY.md), logged with
// their median and worst.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	runs := 2
	if n, err := strconv.Atoi(os.Getenv("TOOLDISPATCH_FAILOVER_RUNS")); err == nil && n > 0 {
		runs = n
	}
	for _, membership := range memberships {
		t.Run(membership, func(t *testing.T) { testClusterFailover(t, membership, runs) })
	}
}

func testClusterFailover(t *testing.T, membership string, runs int) {
	ws := t.TempDir()
	ms, ports := startClusterWith(t, 3, ws, clusterSetup{membership: membership})
	h := newHistory(t, ms[0].logs)
	ctx := context.Background()
	var idle, busy []time.Duration
	for r := 0; r < runs; r++ {
		victim, entry := r%3, (r+1)%3
		kind := "idle"
		if r%2 == 1 {
			kind = "busy"
		}
		// A session the victim owns, its grain active there.
		session := ""
		for i := 0; session == ""; i++ {
			s := fmt.Sprintf("fo-%d-%d", r, i)
			res, err := h.postTurn(ctx, ms[entry].http, s, "", commandCall(s+"-w", "true"))
			if err != nil {
				t.Fatal(err)
			}
			if ownerOf(t, ports, 3, res.Member) == victim {
				session = s
			}
		}
		slowID := session + "-slow"
		if kind == "busy" {
			go func() {
				cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				defer cancel()
				_, _ = h.postTurn(cctx, ms[entry].http, session, "slow", commandCall(slowID, "echo "+slowID+" >> ran.log; sleep 5"))
			}()
			for !strings.Contains(readFile(filepath.Join(ws, "ran.log")), slowID) {
				time.Sleep(5 * time.Millisecond)
			}
		}
		if err := ms[victim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		_ = ms[victim].cmd.Wait()
		nextID := session + "-next"
		var next *turnReply
		for {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			res, err := h.postTurn(cctx, ms[entry].http, session, "next", commandCall(nextID, "echo "+nextID+" >> ran.log"))
			cancel()
			if err == nil {
				next = res
				break
			}
			if time.Since(killed) > 60*time.Second {
				t.Fatalf("run %d: no survivor served the session within 60 s: %v\n%s", r, err, ms[entry].log)
			}
			time.Sleep(20 * time.Millisecond)
		}
		took := time.Since(killed)
		if kind == "busy" {
			busy = append(busy, took)
		} else {
			idle = append(idle, took)
		}
		t.Logf("%s run %d (%s owner): the next turn served %.2fs after the kill, on %s", membership, r, kind, took.Seconds(), next.Member)
		if next.Messages[0].Status != "ok" || ownerOf(t, ports, 3, next.Member) == victim {
			t.Errorf("run %d: next turn %+v", r, next)
		}
		// The session, read from a survivor, holds the interrupted call.
		got := storedStatuses(t, ms[entry].http, session)
		if got[nextID] != "ok" || (kind == "busy" && got[slowID] != "outcome_unknown") {
			t.Errorf("run %d: stored %v, want %s ok and (busy) %s outcome_unknown", r, got, nextID, slowID)
		}
		restartMember(t, ms[victim])
		for {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := h.postTurn(cctx, ms[victim].http, fmt.Sprintf("back-%d", r), "", commandCall(fmt.Sprintf("back-%d", r), "true"))
			cancel()
			if err == nil {
				break
			}
			if time.Since(killed) > 90*time.Second {
				t.Fatalf("run %d: the restarted member never served: %v\n%s", r, err, ms[victim].log)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	ran := map[string]int{}
	for _, id := range strings.Fields(readFile(filepath.Join(ws, "ran.log"))) {
		ran[id]++
		if ran[id] > 1 {
			t.Errorf("call %s ran twice", id)
		}
	}
	t.Logf("%s membership, %d kills: idle owner %s; busy owner %s", membership, runs, figures(idle), figures(busy))
	h.check(ms, http.DefaultClient)
}

// figures is the median and worst of ds.
func figures(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("median %.2fs, worst %.2fs (n=%d)", s[len(s)/2].Seconds(), s[len(s)-1].Seconds(), len(s))
}
