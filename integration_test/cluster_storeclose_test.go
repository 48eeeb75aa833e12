package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestClusterMemberLeavesWhenItsStoreCannotClose: a cluster member whose
// data folder (its own Badger, the result cache) vanished leaves the
// cluster at SIGTERM within --grace and the close budget, exits non-zero
// saying why, and the other member serves its sessions; before, it stayed
// up retrying to flush Badger's memtable until a second signal.
func TestClusterMemberLeavesWhenItsStoreCannotClose(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	var hits atomic.Int64
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "cached body")
	}))
	defer page.Close()
	cfg := filepath.Join(t.TempDir(), "web.toml")
	if err := os.WriteFile(cfg, []byte("[web]\nallow_loopback = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ms, ports := startClusterWith(t, 2, t.TempDir(), clusterSetup{config: cfg, args: []string{"--grace", "1s"}})
	h := newHistory(t, ms[0].logs)
	ctx := context.Background()
	args, _ := json.Marshal(map[string]string{"url": page.URL, "method": "GET"})
	get := func(id string) map[string]any {
		return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "http_request", "arguments": string(args)}}
	}
	// A session member 1 runs: its GET is cached in member 1's Badger.
	session := ""
	for i := 0; session == ""; i++ {
		s := fmt.Sprintf("cache-%d", i)
		r, err := h.postTurn(ctx, ms[0].http, s, "", get(fmt.Sprintf("g%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Messages) != 1 || r.Messages[0].Status != "ok" {
			t.Fatalf("the GET: %+v", r)
		}
		if ownerOf(t, ports, 2, r.Member) == 1 {
			session = s
		}
	}
	if err := os.RemoveAll(ms[1].data); err != nil {
		t.Fatal(err)
	}
	code, took := stopMember(t, ms[1], syscall.SIGTERM, time.Second+25*time.Second+20*time.Second)
	t.Logf("member 1 exited %d, %.1fs after SIGTERM (grace 1s)", code, took.Seconds())
	log := ms[1].log.String()
	if code != 3 || !strings.Contains(log, "did not close") || !strings.Contains(log, "no such file or directory") {
		t.Errorf("exit %d, want 3 and the log saying the store did not close and why:\n%s", code, tail(log, 3000))
	}
	next, err := h.postTurn(ctx, ms[0].http, session, "after", commandCall("after", "echo after"))
	if err != nil || len(next.Messages) != 1 || next.Messages[0].Status != "ok" || ownerOf(t, ports, 2, next.Member) != 0 {
		t.Fatalf("the session's next turn: %+v %v, want ok on member 0", next, err)
	}
	h.check(ms, http.DefaultClient)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
