package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// tokenTransport is an http.RoundTripper that sends a service token.
type tokenTransport struct{ token string }

func (b tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// intruderOutcome is what integration_test/intruder prints.
type intruderOutcome struct {
	Connected bool   `json:"connected"`
	Grain     string `json:"grain"`
	Reply     string `json:"reply"`
	Error     string `json:"error"`
}

// buildIntruder builds integration_test/intruder, a program that speaks
// protoactor's remote protocol to a member as a non-member would.
func buildIntruder(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "intruder")
	if out, err := exec.Command("go", "build", "-o", bin, "./intruder").CombinedOutput(); err != nil {
		t.Fatalf("building the intruder: %v\n%s", err, out)
	}
	return bin
}

// intrude runs the intruder against the member at addr and returns what
// it got.
func intrude(t *testing.T, bin, addr string, args ...string) intruderOutcome {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"-to", addr}, args...)...).Output()
	if err != nil {
		t.Fatalf("intruder %v: %v\n%s", args, err, out)
	}
	var o intruderOutcome
	if err := json.Unmarshal(out, &o); err != nil {
		t.Fatalf("intruder output %q: %v", out, err)
	}
	return o
}

// TestClusterNonMemberRefused runs two members with a service token and
// has a program that is no member and holds no token (the intruder, a
// separate process) speak protoactor's remote protocol to the cluster
// port of the member owning a session with a call waiting for approval:
// its ConfirmReply carrying the call's args_hash (which the model chose,
// so anyone may compute it), an answer, a client result, a cancel and a
// turn of its own. Each is refused at the connection: the intruder's port
// connection is never taken, no grain is handed out, the pending call
// does not run and no turn of the intruder's runs, while the HTTP API
// answers 401 to the same person.
func TestClusterNonMemberRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	const token = "trust-token-7f3e"
	ws := t.TempDir()
	bin := buildIntruder(t)
	ms, ports := startClusterWith(t, 2, ws, clusterSetup{token: token})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := &http.Client{Transport: tokenTransport{token}}
	first, err := postTurnWith(ctx, c, ms[0].http, "trust", "", commandCall("warm", "true"))
	if err != nil {
		t.Fatal(err)
	}
	owner := ownerOf(t, ports, 2, first.Member)
	ownerCluster := fmt.Sprintf("127.0.0.1:%d", ports[2+owner])
	evs := followEvents(t, ctx, c, ms[owner].http, "trust")

	// A deferred approval of the session, kept in the store.
	code, body, err := postJSON(ctx, c, ms[owner].http+"/v1/sessions/trust/turns", map[string]any{
		"run": "r", "provider": "claude-code", "auto_load_schemas": true, "approve": "ask", "confirm": "defer",
		"message": map[string]any{"role": "assistant", "tool_calls": []any{commandCall("deferred-ok", "echo deferred-by-intruder >> ran.log")}}},
		"Authorization", "Bearer "+token)
	if err != nil || code != 200 || !strings.Contains(body, "awaiting_approval") {
		t.Fatalf("deferred turn: %d %s %v", code, body, err)
	}
	ev := waitEvent(t, ctx, evs, "tool_confirm")
	deferredHash, _ := ev["args_hash"].(string)

	// A call waiting for approval on the owner.
	type result struct {
		code int
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, body, err := postJSON(ctx, c, ms[owner].http+"/v1/sessions/trust/turns", map[string]any{
			"run": "r", "provider": "claude-code", "auto_load_schemas": true, "approve": "ask",
			"message": map[string]any{"role": "assistant", "tool_calls": []any{commandCall("needs-ok", "echo approved-by-intruder >> ran.log")}}},
			"Authorization", "Bearer "+token)
		done <- result{code, body, err}
	}()
	ev = waitEvent(t, ctx, evs, "tool_confirm")
	hash, _ := ev["args_hash"].(string)

	// The HTTP API refuses the person without the token.
	code, _, err = postJSON(ctx, http.DefaultClient, ms[owner].http+"/v1/sessions/trust/confirm/needs-ok",
		map[string]any{"approve": true, "args_hash": hash})
	if err != nil || code != http.StatusUnauthorized {
		t.Fatalf("confirm over HTTP without the token: %d %v, want 401", code, err)
	}

	// The same person on the cluster port: without a certificate, with a
	// TLS connection but no certificate, and with a certificate of another
	// CA (tooldispatch cluster certs in another folder).
	foreign := clusterCerts(t, 1)
	ca := filepath.Join(ms[0].certs, "ca.pem")
	for _, who := range []struct {
		name string
		tls  []string
	}{
		{"no TLS", nil},
		{"TLS without a certificate", []string{"-ca", ca}},
		{"a certificate of another CA", []string{"-ca", ca, "-cert", filepath.Join(foreign, "m0.pem"), "-key", filepath.Join(foreign, "m0-key.pem")}},
	} {
		for _, kind := range []struct{ kind, call, hash string }{
			{"confirm", "needs-ok", hash}, {"stored-confirm", "deferred-ok", deferredHash}, {"answer", "needs-ok", hash},
			{"client", "needs-ok", hash}, {"cancel", "intruder/1", hash}, {"turn", "intruder-call", hash},
		} {
			o := intrude(t, bin, ownerCluster, append(who.tls, "-session", "trust", "-kind", kind.kind, "-call", kind.call, "-hash", kind.hash,
				"-script", "echo intruder-turn >> ran.log")...)
			t.Logf("%s from a non-member (%s): %+v", kind.kind, who.name, o)
			if o.Connected || o.Grain != "" || o.Reply != "" {
				t.Errorf("the cluster port took a non-member's %s (%s): %+v", kind.kind, who.name, o)
			}
		}
	}
	// The static membership port takes no one without a certificate
	// either.
	amPort := ports[4+owner]
	for _, url := range []string{fmt.Sprintf("http://127.0.0.1:%d/_health", amPort), fmt.Sprintf("https://127.0.0.1:%d/_health", amPort)} {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		// A plain HTTP request gets Go's "client sent an HTTP request to
		// an HTTPS server" 400 at most; nothing of the member.
		if resp, err := hc.Get(url); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "kinds") {
				t.Errorf("the membership port answered %s without a certificate: %d %s", url, resp.StatusCode, body)
			}
		}
	}
	// A member's certificate is membership: the same program with one
	// reaches the grain (a control: the refusals above are the
	// certificate's doing). It asks about a call that is not pending.
	o := intrude(t, bin, ownerCluster, "-ca", ca, "-cert", filepath.Join(ms[0].certs, "m0.pem"), "-key", filepath.Join(ms[0].certs, "m0-key.pem"),
		"-session", "trust", "-kind", "answer", "-call", "nope")
	if !o.Connected || !strings.Contains(o.Reply, "no_pending") {
		t.Errorf("a program with a member's certificate: %+v, want it connected and answered no_pending", o)
	}
	if ran := readFile(filepath.Join(ws, "ran.log")); strings.Contains(ran, "approved-by-intruder") || strings.Contains(ran, "intruder-turn") ||
		strings.Contains(ran, "deferred-by-intruder") {
		t.Fatalf("a non-member's message made a call run: ran.log %q", ran)
	}
	// The deferred approval is still waiting for the token holder.
	req, _ := http.NewRequestWithContext(ctx, "GET", ms[1-owner].http+"/v1/pending", nil)
	if resp, err := c.Do(req); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `"call_id":"deferred-ok"`) {
			t.Errorf("the deferred approval after the intruder: %s", b)
		}
	}
	// The call still waits: the owner of the token denies it.
	code, body, err = postJSON(ctx, c, ms[owner].http+"/v1/sessions/trust/confirm/needs-ok",
		map[string]any{"approve": false, "args_hash": hash}, "Authorization", "Bearer "+token)
	if err != nil || code != 200 {
		t.Fatalf("the token holder's denial: %d %s %v", code, body, err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.code != 200 || !strings.Contains(r.body, "denied") {
			t.Errorf("the turn after the denial: %d %s %v", r.code, r.body, r.err)
		}
	case <-ctx.Done():
		t.Fatal("the turn never ended")
	}
	if ran := readFile(filepath.Join(ws, "ran.log")); ran != "" {
		t.Errorf("ran.log %q, want nothing run", ran)
	}
}

// TestClusterEtcdOverTLS runs two members with etcd membership over https,
// the etcd taking only clients with a certificate of the cluster's CA: the
// members present theirs (their [cluster] certificates), register and
// serve each other's sessions, while a client without a certificate is
// refused by etcd.
func TestClusterEtcdOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts cluster members")
	}
	ws := t.TempDir()
	ms, ports := startClusterWith(t, 2, ws, clusterSetup{membership: "etcd-tls"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := map[int]bool{}
	for i := 0; len(seen) < 2 && i < 64; i++ {
		r, err := postTurn(ctx, ms[i%2].http, fmt.Sprintf("e-%d", i), "", commandCall(fmt.Sprintf("e%d", i), "true"))
		if err != nil {
			t.Fatal(err)
		}
		seen[ownerOf(t, ports, 2, r.Member)] = true
	}
	if len(seen) != 2 {
		t.Fatalf("the sessions landed on members %v only: the members did not find each other through etcd", seen)
	}
	etcdURL := ms[0].cmd.Args[slices.Index(ms[0].cmd.Args, "--etcd")+1]
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if resp, err := hc.Get(etcdURL + "/v2/keys/"); err == nil {
		resp.Body.Close()
		t.Errorf("etcd answered a client without a certificate: %d", resp.StatusCode)
	}
}
