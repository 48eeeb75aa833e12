package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// pgTestServer starts a throwaway PostgreSQL on loopback with
// scripts/pg-test-server.sh and returns its URL, or skips saying why.
func pgTestServer(t *testing.T) string {
	t.Helper()
	if url := os.Getenv("TOOLDISPATCH_PG_URL"); url != "" && url != "skip" {
		return url
	}
	if os.Getenv("TOOLDISPATCH_PG_URL") == "skip" {
		t.Skip("TOOLDISPATCH_PG_URL=skip")
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl"); len(m) == 0 {
		t.Skip("PostgreSQL not installed: .ci/run installs the postgresql package")
	}
	script := filepath.Join("..", "..", "scripts", "pg-test-server.sh")
	out, err := exec.Command(script, "start", "--watch", fmt.Sprint(os.Getpid())).Output()
	if err != nil {
		t.Fatalf("starting PostgreSQL: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("unexpected output of %s: %q", script, out)
	}
	t.Cleanup(func() { _ = exec.Command(script, "stop", lines[1]).Run() })
	return lines[0]
}

// TestClusterStartFailureIsAnError: when the cluster member cannot start
// (here: --cluster-addr names no host; the member has its certificates, so
// that it gets that far), opening the stack fails with an error instead of
// returning a stack without a dispatcher.
func TestClusterStartFailureIsAnError(t *testing.T) {
	pg := pgTestServer(t)
	e, _, _ := testEnv(nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	certs := t.TempDir()
	makeCerts(t, certs, "m0")
	config := writeConfig(t, "[cluster]\nca_file = \""+filepath.Join(certs, "ca.pem")+"\"\ncert_file = \""+
		filepath.Join(certs, "m0.pem")+"\"\nkey_file = \""+filepath.Join(certs, "m0-key.pem")+"\"\n")
	o, err := e.parseFlags("serve", []string{"--workspace", t.TempDir(), "--data", t.TempDir(), "--config", config,
		"--cluster", "test", "--cluster-addr", ":0", "--postgres", pg,
		"--peers", fmt.Sprintf("127.0.0.1:%d", port), "--automanage-port", fmt.Sprint(port)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := openStack(o, zerolog.Nop(), nil)
	if err == nil {
		if s != nil {
			s.close(zerolog.Nop())
		}
		t.Fatalf("openStack = (%+v, nil), want an error: the cluster member did not start", s)
	}
	if s != nil {
		t.Errorf("openStack returned a stack with its error %v", err)
	}
	if !strings.Contains(err.Error(), "Host") {
		t.Errorf("err = %v, want it to name the missing host", err)
	}
}
