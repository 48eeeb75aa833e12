package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// bigCalls are n calls of a tool no member has, each with per bytes of
// arguments: each ends unknown_tool, but the whole turn crosses members.
func bigCalls(n, per int) []map[string]any {
	calls := make([]map[string]any, n)
	for i := range calls {
		args, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", per)})
		calls[i] = map[string]any{"id": fmt.Sprintf("b%d", i), "type": "function",
			"function": map[string]any{"name": "no_such_tool", "arguments": string(args)}}
	}
	return calls
}

// TestClusterCarriesBigTurns: a turn within the turn limit reaches the
// session's grain on another member (DispatchTurn over the cluster
// transport) and its reply comes back: six calls of 900 KiB of arguments,
// more than gRPC's default 4 MiB message. The members' [dispatcher]
// max_turn_bytes of 8 MiB holds there too: 10 bytes of arguments more are
// refused before anything runs, with the message every route gives.
func TestClusterCarriesBigTurns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	config := filepath.Join(t.TempDir(), "tooldispatch.toml")
	if err := os.WriteFile(config, []byte("[dispatcher]\nmax_turn_bytes = 8388608\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ms, ports := startClusterWith(t, 2, t.TempDir(), clusterSetup{args: []string{"--config", config}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// A session the second member owns, entered through the first.
	session := ""
	for i := 0; i < 64 && session == ""; i++ {
		s := fmt.Sprintf("big-%d", i)
		r, err := postTurn(ctx, ms[0].http, s, s+"-probe", commandCall(s+"-c", "true"))
		if err != nil {
			t.Fatalf("probe turn: %v", err)
		}
		if ownerOf(t, ports, 2, r.Member) == 1 {
			session = s
		}
	}
	if session == "" {
		t.Fatal("no session of 64 is owned by the second member")
	}
	r, err := postTurn(ctx, ms[0].http, session, session+"-big", bigCalls(6, 900<<10)...)
	if err != nil {
		t.Fatalf("a turn of 5.3 MiB of arguments entered on another member than its session's: %v\nentry member's log:\n%s", err, ms[0].log.String())
	}
	if len(r.Messages) != 6 || r.Messages[5].Status != "unknown_tool" {
		t.Errorf("reply: %+v", r.Messages)
	}
	over := append(bigCalls(8, 1<<20-len(`{"pad":""}`)), bigCalls(1, 0)...)
	over[8]["id"] = "b8"
	_, err = postTurn(ctx, ms[0].http, session, session+"-over", over...)
	if want := "the turn's arguments total 8388618 bytes, more than the 8388608 a turn may carry"; err == nil || !strings.HasPrefix(err.Error(), "status 400:") || !strings.Contains(err.Error(), want) {
		t.Errorf("a turn over the members' limit: %v, want %q", err, want)
	}
}
