package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pgServer starts a throwaway PostgreSQL on loopback with
// scripts/pg-test-server.sh, or skips saying why.
func pgServer(t *testing.T) string {
	t.Helper()
	if url := os.Getenv("TOOLDISPATCH_PG_URL"); url != "" && url != "skip" {
		return url
	}
	if os.Getenv("TOOLDISPATCH_PG_URL") == "skip" {
		t.Skip("TOOLDISPATCH_PG_URL=skip")
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(matches) == 0 {
		t.Skip("PostgreSQL not installed: .ci/run installs the postgresql package")
	}
	out, err := exec.Command("../scripts/pg-test-server.sh", "start", "--watch", fmt.Sprint(os.Getpid())).Output()
	if err != nil {
		t.Fatalf("starting PostgreSQL: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Cleanup(func() { _ = exec.Command("../scripts/pg-test-server.sh", "stop", lines[1]).Run() })
	return lines[0]
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// member is one `tooldispatch serve --cluster` process.
type member struct {
	cmd  *exec.Cmd
	http string
	name string      // m0, m1, …: its log files' names
	log  *syncBuffer // its output since its last start
	logs *memberLogs // where every start's output is kept
	data string      // --data
	// certs is the folder of the cluster's mutual TLS certificates
	// (tooldispatch cluster certs): ca.pem, and mI.pem, mI-key.pem for
	// member I.
	certs string
}

// syncBuffer is a bytes.Buffer safe for the process's output goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type turnReply struct {
	Turn     int64  `json:"turn"`
	Replayed bool   `json:"replayed"`
	Member   string `json:"member"`
	Messages []struct {
		ToolCallID string `json:"tool_call_id"`
		Status     string `json:"status"`
		Content    string `json:"content"`
	} `json:"messages"`
	Error string `json:"error"`
}

func postTurn(ctx context.Context, base, session, turnID string, calls ...map[string]any) (*turnReply, error) {
	return postTurnWith(ctx, http.DefaultClient, base, session, turnID, calls...)
}

func commandCall(id, script string) map[string]any {
	args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}})
	return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "run_command", "arguments": string(args)}}
}

// TestClusterMemberKilled runs three members as separate processes over one
// PostgreSQL; SIGKILLs the member that owns a busy session in the middle of
// a turn; and shows that a survivor serves the session's next turn within
// seconds, every committed turn is intact, the interrupted call reads
// outcome_unknown, and nothing ran or was committed twice.
func TestClusterMemberKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three cluster members")
	}
	for _, membership := range memberships {
		t.Run(membership, func(t *testing.T) { testClusterMemberKilled(t, membership) })
	}
}

func testClusterMemberKilled(t *testing.T, membership string) {
	ws := t.TempDir() // shared by the members: the side file of executions
	ms, ports := startClusterWith(t, 3, ws, clusterSetup{membership: membership})
	h := newHistory(t, ms[0].logs)
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	// Find the owner of the busy session.
	first, err := h.postTurn(ctx, ms[0].http, "busy", "t1", commandCall("t1c1", "echo t1c1 >> ran.log"))
	if err != nil || first.Member == "" {
		t.Fatalf("first turn: %+v %v", first, err)
	}
	owner := ownerOf(t, ports, 3, first.Member)
	entry := (owner + 1) % 3 // a survivor takes the requests
	// A slow turn on the owner; kill it while the call runs.
	go func() {
		_, _ = h.postTurn(ctx, ms[entry].http, "busy", "t2", commandCall("t2c1", "echo t2c1 >> ran.log; sleep 5"))
	}()
	for !strings.Contains(readFile(filepath.Join(ws, "ran.log")), "t2c1") {
		if time.Now().After(deadline) {
			t.Fatal("the slow call never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := ms[owner].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var third *turnReply
	for {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		third, err = h.postTurn(cctx, ms[entry].http, "busy", "t3", commandCall("t3c1", "echo t3c1 >> ran.log"))
		cancel()
		if err == nil {
			break
		}
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("no survivor served the session after the kill: %v\n%s", err, ms[entry].log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	recovery := time.Since(killed)
	t.Logf("%s membership: a survivor served the killed member's session %.2fs after the kill (turn %d on %s)", membership, recovery.Seconds(), third.Turn, third.Member)
	if third.Messages[0].Status != "ok" {
		t.Fatalf("third turn: %+v", third)
	}
	// The persisted session, read from a survivor.
	got := storedStatuses(t, ms[entry].http, "busy")
	want := map[string]string{"t1c1": "ok", "t2c1": "outcome_unknown", "t3c1": "ok"}
	for id, st := range want {
		if got[id] != st {
			t.Errorf("%s = %q, want %q (all: %v)", id, got[id], st, got)
		}
	}
	if ran := strings.Fields(readFile(filepath.Join(ws, "ran.log"))); strings.Join(ran, " ") != "t1c1 t2c1 t3c1" {
		t.Errorf("executions %v, want each once", ran)
	}
	// Replaying the interrupted turn id runs nothing.
	again, err := h.postTurn(ctx, ms[entry].http, "busy", "t2", commandCall("t2c1", "echo t2c1 >> ran.log; sleep 5"))
	if err != nil || again.Messages[0].Status != "outcome_unknown" {
		t.Errorf("replay of t2: %+v %v", again, err)
	}
	h.check(ms, http.DefaultClient)
}

// storedStatuses reads a session from the member at base and returns its
// calls' statuses; a call stored twice fails the test.
func storedStatuses(t *testing.T, base, session string) map[string]string {
	t.Helper()
	resp, err := http.Get(base + "/v1/sessions/" + session)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sess struct {
		Tools []struct {
			ToolCallID string `json:"tool_call_id"`
			Status     string `json:"status"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&sess); err != nil {
		t.Fatalf("reading session %s: %v", session, err)
	}
	got := map[string]string{}
	for _, m := range sess.Tools {
		if _, dup := got[m.ToolCallID]; dup {
			t.Errorf("call %s committed twice", m.ToolCallID)
		}
		got[m.ToolCallID] = m.Status
	}
	return got
}

// Cluster memberships the cluster tests run with: a static member list
// (protoactor's automanaged provider) and etcd.
var memberships = []string{"static", "etcd"}

// clusterSetup says how startClusterWith starts the members.
type clusterSetup struct {
	membership string   // "static" (default), "etcd" or "etcd-tls" (etcd over https, taking only the cluster's certificates)
	args       []string // more serve flags
	env        []string // more environment variables
	token      string   // the members' --token (the warm-up turns send it)
	config     string   // a configuration file the members share; [cluster] TLS keys are added to it
	pg         string   // the PostgreSQL URL; empty: a throwaway server of the test's own (pgServer)
}

// clusterCerts makes the mutual TLS certificates of n members on
// loopback with tooldispatch cluster certs and returns their folder.
func clusterCerts(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	for i := 0; i < n; i++ {
		if out, err := exec.Command(binary, "cluster", "certs", "--dir", dir, "--host", "127.0.0.1,localhost", fmt.Sprintf("m%d", i)).CombinedOutput(); err != nil {
			t.Fatalf("cluster certs: %v\n%s", err, out)
		}
	}
	return dir
}

// memberConfig writes member i's configuration: the shared file's keys
// (if any) with [cluster] ca_file, cert_file and key_file added.
func memberConfig(t *testing.T, shared, certs string, i int) string {
	t.Helper()
	base := ""
	if shared != "" {
		b, err := os.ReadFile(shared)
		if err != nil {
			t.Fatal(err)
		}
		base = string(b)
	}
	keys := fmt.Sprintf("ca_file = %q\ncert_file = %q\nkey_file = %q\n", filepath.Join(certs, "ca.pem"),
		filepath.Join(certs, fmt.Sprintf("m%d.pem", i)), filepath.Join(certs, fmt.Sprintf("m%d-key.pem", i)))
	if strings.Contains(base, "[cluster]\n") {
		base = strings.Replace(base, "[cluster]\n", "[cluster]\n"+keys, 1)
	} else {
		base += "\n[cluster]\n" + keys
	}
	p := filepath.Join(t.TempDir(), fmt.Sprintf("m%d.toml", i))
	if err := os.WriteFile(p, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startCluster starts n members over one PostgreSQL with a static member
// list and waits until each serves a turn.
func startCluster(t *testing.T, n int, ws string) ([]*member, []int) {
	t.Helper()
	return startClusterWith(t, n, ws, clusterSetup{})
}

// startClusterWith starts n members over one PostgreSQL as cs says and
// waits until each serves a turn. With etcd membership it starts a
// throwaway etcd, or skips saying why.
func startClusterWith(t *testing.T, n int, ws string, cs clusterSetup) ([]*member, []int) {
	t.Helper()
	certs := clusterCerts(t, n)
	var membership []string
	switch cs.membership {
	case "etcd":
		membership = []string{"--etcd", etcdServer(t)}
	case "etcd-tls":
		if out, err := exec.Command(binary, "cluster", "certs", "--dir", certs, "--host", "127.0.0.1,localhost", "etcd").CombinedOutput(); err != nil {
			t.Fatalf("cluster certs: %v\n%s", err, out)
		}
		membership = []string{"--etcd", startEtcd(t, certs)}
	}
	pg := cs.pg
	if pg == "" {
		pg = pgServer(t)
	}
	ports := freePorts(t, 3*n)
	logs := newMemberLogs(t)
	var peers []string
	for i := 0; i < n; i++ {
		peers = append(peers, fmt.Sprintf("127.0.0.1:%d", ports[2*n+i]))
	}
	var ms []*member
	for i := 0; i < n; i++ {
		m := &member{http: fmt.Sprintf("http://127.0.0.1:%d", ports[i]), name: fmt.Sprintf("m%d", i), logs: logs, certs: certs, data: t.TempDir()}
		args := []string{"serve", "--approve", "all", "--shell", "--workspace", ws, "--data", m.data,
			"--addr", fmt.Sprintf("127.0.0.1:%d", ports[i]), "--cluster", "it", "--cluster-addr", fmt.Sprintf("127.0.0.1:%d", ports[n+i]),
			"--postgres", pg, "--log-level", memberLogLevel(), "--config", memberConfig(t, cs.config, certs, i)}
		if membership == nil {
			args = append(args, "--peers", strings.Join(peers, ","), "--automanage-port", fmt.Sprint(ports[2*n+i]))
		} else {
			args = append(args, membership...)
		}
		if cs.token != "" {
			args = append(args, "--token", cs.token)
		}
		m.cmd = exec.Command(binary, append(args, cs.args...)...)
		if len(cs.env) > 0 {
			m.cmd.Env = append(os.Environ(), cs.env...)
		}
		logs.attach(t, m)
		if err := m.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	t.Cleanup(func() {
		for _, m := range ms {
			_ = m.cmd.Process.Signal(syscall.SIGCONT)
			_ = m.cmd.Process.Kill()
			_ = m.cmd.Wait()
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	hc := http.DefaultClient
	if cs.token != "" {
		hc = &http.Client{Transport: tokenTransport{cs.token}}
	}
	for i, m := range ms {
		for {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := postTurnWith(cctx, hc, m.http, fmt.Sprintf("warm-%d", i), "", commandCall("w", "true"))
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("member %d never served a turn: %v\n%s", i, err, m.log)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return ms, ports
}

// ownerOf returns the index of the member whose cluster address is addr.
func ownerOf(t *testing.T, ports []int, n int, addr string) int {
	t.Helper()
	for i := 0; i < n; i++ {
		if strings.HasSuffix(addr, fmt.Sprintf(":%d", ports[n+i])) {
			return i
		}
	}
	t.Fatalf("member %q is none of the members", addr)
	return -1
}

// TestClusterPartitionedMemberFenced SIGSTOPs the member that owns a
// session in the middle of a turn (a partition, as far as the others can
// tell), lets a survivor take the session over, then SIGCONTs it: the
// returning member's commit is refused by the store (fencing), so the
// session never has two writers — the interrupted call stays
// outcome_unknown and no turn number is written twice.
func TestClusterPartitionedMemberFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	for _, membership := range memberships {
		t.Run(membership, func(t *testing.T) { testClusterPartitionedMemberFenced(t, membership) })
	}
}

func testClusterPartitionedMemberFenced(t *testing.T, membership string) {
	ws := t.TempDir()
	ms, ports := startClusterWith(t, 2, ws, clusterSetup{membership: membership})
	h := newHistory(t, ms[0].logs)
	ctx := context.Background()
	first, err := h.postTurn(ctx, ms[0].http, "part", "p1", commandCall("p1c1", "echo p1c1 >> ran.log"))
	if err != nil {
		t.Fatal(err)
	}
	owner := ownerOf(t, ports, 2, first.Member)
	other := 1 - owner
	slow := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		_, err := h.postTurn(cctx, ms[owner].http, "part", "p2", commandCall("p2c1", "echo p2c1 >> ran.log; sleep 2"))
		slow <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(readFile(filepath.Join(ws, "ran.log")), "p2c1") {
		if time.Now().After(deadline) {
			t.Fatal("the slow call never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := ms[owner].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	var third *turnReply
	for {
		// A client that gave up would cancel the turn (and its turn id
		// would then replay the canceled turn): wait long enough.
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		third, err = h.postTurn(cctx, ms[other].http, "part", "p3", commandCall("p3c1", "echo p3c1 >> ran.log"))
		cancel()
		if err == nil {
			break
		}
		if time.Since(stopped) > 40*time.Second {
			t.Fatalf("the survivor never took the session over: %v\n%s", err, ms[other].log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%s membership: the survivor took the session over %.2fs after the owner stopped (turn %d)", membership, time.Since(stopped).Seconds(), third.Turn)
	if err := ms[owner].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// The returning member finishes its call and tries to commit: refused.
	select {
	case err := <-slow:
		if err == nil {
			t.Error("the partitioned member's turn reported success after the session was taken over")
		} else {
			t.Logf("the partitioned member's turn ended with: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the partitioned member's turn never ended")
	}
	resp, err := http.Get(ms[other].http + "/v1/sessions/part")
	if err != nil {
		t.Fatal(err)
	}
	var sess struct {
		ToolHistories []json.RawMessage `json:"tool_histories"`
		Tools         []struct {
			ToolCallID string `json:"tool_call_id"`
			Status     string `json:"status"`
		} `json:"tools"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&sess)
	resp.Body.Close()
	got := map[string]string{}
	for _, m := range sess.Tools {
		if _, dup := got[m.ToolCallID]; dup {
			t.Errorf("call %s written twice: two writers", m.ToolCallID)
		}
		got[m.ToolCallID] = m.Status
	}
	want := map[string]string{"p1c1": "ok", "p2c1": "outcome_unknown", "p3c1": "ok"}
	for id, st := range want {
		if got[id] != st {
			t.Errorf("%s = %q, want %q (all: %v)", id, got[id], st, got)
		}
	}
	h.check(ms, http.DefaultClient)
}

// TestClusterThroughput measures calls/s with 1, 2 and 3 members on
// loopback (CPU-bound: 10-call turns of calculate from 32 clients on
// distinct sessions), with the requests spread over the members and with
// owner routing (see measureClusterThroughput). It runs only with
// TOOLDISPATCH_CLUSTER_BENCH=1; the figures go to docs/PERFORMANCE.md.
func TestClusterThroughput(t *testing.T) {
	if os.Getenv("TOOLDISPATCH_CLUSTER_BENCH") != "1" {
		t.Skip("a measurement, not a test: set TOOLDISPATCH_CLUSTER_BENCH=1")
	}
	measureClusterThroughput(t)
}

// TestClusterConfirmFromAnotherMember starts a turn that needs a
// confirmation on the member that owns its session, follows the session's
// event stream on the other member, and approves the call there: the
// tool_confirm event crosses members and so does the answer.
func TestClusterConfirmFromAnotherMember(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	ws := t.TempDir()
	ms, ports := startCluster(t, 2, ws)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first, err := postTurn(ctx, ms[0].http, "conf", "", commandCall("warm", "true"))
	if err != nil {
		t.Fatal(err)
	}
	owner := ownerOf(t, ports, 2, first.Member)
	other := ms[1-owner]

	// The other member's event stream for the session.
	req, _ := http.NewRequestWithContext(ctx, "GET", other.http+"/v1/sessions/conf/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	confirms := make(chan map[string]any, 4)
	go func() {
		dec := bufio.NewScanner(resp.Body)
		for dec.Scan() {
			line := dec.Text()
			if !strings.HasPrefix(line, "data: ") {
				continue
			}
			var ev map[string]any
			if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev) == nil && ev["event"] == "tool_confirm" {
				confirms <- ev
			}
		}
	}()

	// The turn goes to the owner and asks.
	body, _ := json.Marshal(map[string]any{"run": "r", "provider": "claude-code", "auto_load_schemas": true, "approve": "ask",
		"message": map[string]any{"role": "assistant", "tool_calls": []any{commandCall("needs-ok", "echo approved >> ran.log")}}})
	done := make(chan *turnReply, 1)
	go func() {
		r, err := http.Post(ms[owner].http+"/v1/sessions/conf/turns", "application/json", bytes.NewReader(body))
		if err != nil {
			done <- &turnReply{Error: err.Error()}
			return
		}
		defer r.Body.Close()
		var tr turnReply
		_ = json.NewDecoder(r.Body).Decode(&tr)
		done <- &tr
	}()
	var ev map[string]any
	select {
	case ev = <-confirms:
	case <-ctx.Done():
		t.Fatalf("no tool_confirm reached the other member's stream\nowner log:\n%s", ms[owner].log)
	}
	hash, _ := ev["args_hash"].(string)
	cb, _ := json.Marshal(map[string]any{"approve": true, "args_hash": hash})
	cr, err := http.Post(other.http+"/v1/sessions/conf/confirm/needs-ok", "application/json", bytes.NewReader(cb))
	if err != nil {
		t.Fatal(err)
	}
	cr.Body.Close()
	if cr.StatusCode != 200 {
		t.Fatalf("confirm on the other member: %d", cr.StatusCode)
	}
	select {
	case tr := <-done:
		if len(tr.Messages) != 1 || tr.Messages[0].Status != "ok" {
			t.Fatalf("turn after a confirmation from the other member: %+v", tr)
		}
	case <-ctx.Done():
		t.Fatal("the turn never ended")
	}
	if !strings.Contains(readFile(filepath.Join(ws, "ran.log")), "approved") {
		t.Fatal("the approved call did not run")
	}
}
