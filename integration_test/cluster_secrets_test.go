package integration

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestClusterSecretAfterTakeover stores a secret through store_secret on
// the member A that owns a session (answered on A's event stream, the
// human keeping one of the two proposed origins), SIGKILLs A, and uses the
// secret from the next turn of the same session, now on B: the members
// share the secrets (PostgreSQL) and their key (kept there, as no member
// names [secrets] key_file), so B sends it to the bound origin, still
// refuses the origin the human dropped, and no log, reply or event holds
// the value.
func TestClusterSecretAfterTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	const secret = "t4keover-SECRET-0a1b2c3d4e"
	var mu sync.Mutex
	saw := map[string][]string{} // server → X-Api-Key values it received
	server := func(name string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			saw[name] = append(saw[name], r.Header.Get("X-Api-Key"))
			mu.Unlock()
			_, _ = w.Write([]byte("hello from " + name + "\n"))
		}))
		t.Cleanup(s.Close)
		return s
	}
	bound, dropped := server("bound"), server("dropped")
	config := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(config, []byte("[web]\nallow_loopback = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ms, ports := startClusterWith(t, 2, t.TempDir(), clusterSetup{
		config: config, env: []string{"TOOLDISPATCH_SECRET_KEY="}})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	first, err := postTurn(ctx, ms[0].http, "vault", "", commandCall("warm", "true"))
	if err != nil {
		t.Fatal(err)
	}
	owner := ownerOf(t, ports, 2, first.Member)
	a, b := ms[owner], ms[1-owner]
	c := http.DefaultClient

	// store_secret on A, answered on A.
	evs := followEvents(t, ctx, c, a.http, "vault")
	done := make(chan string, 1)
	go func() {
		_, body, err := postJSON(ctx, c, a.http+"/v1/sessions/vault/turns", map[string]any{
			"run": "r", "provider": "claude-code", "auto_load_schemas": true, "approve": "all",
			"message": map[string]any{"role": "assistant", "tool_calls": []any{
				toolCall("s1", "store_secret", map[string]any{"name": "TOKEN", "description": "the test service",
					"origins": []string{bound.URL, dropped.URL}}),
			}}})
		if err != nil {
			body = err.Error()
		}
		done <- body
	}()
	if ev := waitEvent(t, ctx, evs, "secret_request"); ev["call_id"] != "s1" {
		t.Fatalf("secret event %v", ev)
	}
	code, body, err := postJSON(ctx, c, a.http+"/v1/sessions/vault/answer/s1",
		map[string]any{"text": secret, "origins": []string{bound.URL}})
	if err != nil || code != 200 {
		t.Fatalf("secret answer: %d %s %v", code, body, err)
	}
	var stored string
	select {
	case stored = <-done:
	case <-ctx.Done():
		t.Fatal("the store_secret turn never ended")
	}
	if !strings.Contains(stored, `"status":"ok"`) {
		t.Fatalf("store_secret on A: %s", stored)
	}
	replies := []string{stored}

	use := func(prefix string) []map[string]any {
		key := map[string]string{"X-Api-Key": "${secret:TOKEN}"}
		return []map[string]any{
			// A path of each turn's own: the same call again in the run
			// would replay the earlier result (deduped) and send nothing.
			toolCall(prefix+"-bound", "http_request", map[string]any{"url": bound.URL + "/" + prefix, "headers": key}),
			toolCall(prefix+"-dropped", "http_request", map[string]any{"url": dropped.URL + "/" + prefix, "headers": key}),
		}
	}
	// On A, before the kill: the secret works where it is bound.
	r, err := postTurn(ctx, a.http, "vault", "use-a", use("a")...)
	if err != nil || len(r.Messages) != 2 || r.Messages[0].Status != "ok" {
		t.Fatalf("using the secret on A: %+v %v", r, err)
	}

	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var after *turnReply
	for {
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		after, err = postTurn(cctx, b.http, "vault", "use-b", use("b")...)
		ccancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("B never served the session after A's kill: %v\n%s", err, b.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if after.Member == first.Member {
		t.Fatalf("the turn after the kill ran on the killed member %s", after.Member)
	}
	got := map[string]string{}
	for _, m := range after.Messages {
		got[m.ToolCallID] = m.Status + ": " + m.Content
		replies = append(replies, m.Content)
	}
	if s := got["b-bound"]; !strings.HasPrefix(s, "ok: ") || !strings.Contains(s, "hello from bound") {
		t.Errorf("the secret from B to its bound origin: %s", s)
	}
	if s := got["b-dropped"]; !strings.HasPrefix(s, "error: ") || !strings.Contains(s, "may only be sent to") {
		t.Errorf("the secret from B to the origin the human dropped: %s", s)
	}
	mu.Lock()
	if want := []string{secret, secret}; strings.Join(saw["bound"], "|") != strings.Join(want, "|") {
		t.Errorf("the bound origin received %d requests carrying the secret, want 2 (one from A, one from B)", countOf(saw["bound"], secret))
	}
	for _, v := range saw["dropped"] {
		if strings.Contains(v, secret) {
			t.Error("the dropped origin received the secret")
		}
	}
	mu.Unlock()
	for i, m := range ms {
		if strings.Contains(m.log.String(), secret) {
			t.Errorf("member %d's log holds the secret", i)
		}
	}
	for _, s := range replies {
		if strings.Contains(s, secret) {
			t.Error("a reply holds the secret")
		}
	}
}

func countOf(vs []string, v string) int {
	n := 0
	for _, x := range vs {
		if x == v {
			n++
		}
	}
	return n
}

// TestClusterSecretKeyMismatch: a member whose [secrets] key_file holds
// another key than the one the cluster's secrets were sealed with refuses
// to start, naming [secrets] key_file, instead of failing every secret
// later; a member with the same key file joins.
func TestClusterSecretKeyMismatch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	dir := t.TempDir()
	keyFile := func(name string, b byte) string {
		p := filepath.Join(dir, name)
		k := make([]byte, 32)
		for i := range k {
			k[i] = b
		}
		if err := os.WriteFile(p, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	config := func(name, key string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("[secrets]\nkey_file = \""+key+"\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := config("good.toml", keyFile("good.key", 1))
	bad := config("bad.toml", keyFile("bad.key", 2))
	ms, ports := startClusterWith(t, 1, t.TempDir(), clusterSetup{
		config: good, env: []string{"TOOLDISPATCH_SECRET_KEY="}})
	// A second process over the same PostgreSQL with another key file. It
	// fails while opening its tools, before it joins the cluster.
	pg := ms[0].cmd.Args[slices.Index(ms[0].cmd.Args, "--postgres")+1]
	free := freePorts(t, 3)
	cmd := exec.Command(binary, "serve", "--workspace", t.TempDir(), "--data", t.TempDir(),
		"--addr", "127.0.0.1:"+strconv.Itoa(free[0]), "--cluster", "it", "--cluster-addr", "127.0.0.1:"+strconv.Itoa(free[1]),
		"--postgres", pg, "--peers", "127.0.0.1:"+strconv.Itoa(ports[2])+",127.0.0.1:"+strconv.Itoa(free[2]),
		"--automanage-port", strconv.Itoa(free[2]), "--config", bad)
	cmd.Env = append(os.Environ(), "TOOLDISPATCH_SECRET_KEY=")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// It either exits, or comes up and answers (the failure), or hangs.
	hung := time.After(90 * time.Second)
	for refused := false; !refused; {
		select {
		case <-hung:
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("a member with another key file neither exited nor served within 90 s:\n%s", out.String())
		case err := <-exited:
			if err == nil {
				t.Fatalf("a member with another key file exited cleanly:\n%s", out.String())
			}
			refused = true
		case <-time.After(200 * time.Millisecond):
			// Its service listens only once its tools are open.
			resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(free[0]) + "/healthz")
			if err == nil {
				resp.Body.Close()
				_ = cmd.Process.Kill()
				<-exited
				t.Fatalf("a member with another key file started its service (healthz %d):\n%s", resp.StatusCode, out.String())
			}
		}
	}
	msg := out.String()
	if !strings.Contains(msg, "[secrets] key_file") || !strings.Contains(msg, "another key") {
		t.Errorf("the refusal does not name [secrets] key_file:\n%s", msg)
	}
	t.Logf("refusal: %s", strings.TrimSpace(msg))
}
