package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// etcdStartTimeout bounds how long a throwaway etcd may take to serve.
const etcdStartTimeout = 30 * time.Second

// etcdServer starts a throwaway single-node etcd on loopback (Debian's
// etcd-server package; .ci/run installs it) with its data in a temp dir,
// stops it when the test ends and returns its client URL; without etcd it
// skips saying why. TOOLDISPATCH_ETCD_URL names an etcd to use instead
// ("skip" skips).
func etcdServer(t *testing.T) string {
	t.Helper()
	return startEtcd(t, "")
}

// startEtcd is etcdServer; with certs (a folder of tooldispatch cluster
// certs holding an "etcd" certificate) it serves https and takes only
// clients with a certificate of that CA.
func startEtcd(t *testing.T, certs string) string {
	t.Helper()
	switch url := os.Getenv("TOOLDISPATCH_ETCD_URL"); url {
	case "":
	case "skip":
		t.Skip("TOOLDISPATCH_ETCD_URL=skip")
	default:
		return url
	}
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd not installed: .ci/run installs the etcd-server package")
	}
	ports := freePorts(t, 2)
	scheme := "http"
	var tlsArgs []string
	hc := http.DefaultClient
	if certs != "" {
		scheme = "https"
		tlsArgs = []string{"--cert-file", filepath.Join(certs, "etcd.pem"), "--key-file", filepath.Join(certs, "etcd-key.pem"),
			"--trusted-ca-file", filepath.Join(certs, "ca.pem"), "--client-cert-auth"}
		cfg, err := memberTLS(certs, "etcd")
		if err != nil {
			t.Fatal(err)
		}
		hc = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	client := fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	log := &syncBuffer{}
	cmd := exec.Command(bin, append([]string{"--name", "it", "--data-dir", t.TempDir(),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "it=" + peer, "--initial-cluster-state", "new", "--log-level", "warn"}, tlsArgs...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting etcd: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	// Wait until it answers /health (or gives up).
	ctx, cancel := context.WithTimeout(context.Background(), etcdStartTimeout)
	defer cancel()
	for {
		select {
		case err := <-exited:
			t.Fatalf("etcd exited before serving: %v\n%s", err, log)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", client+"/health", nil)
		if resp, err := hc.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), `"health":"true"`) {
				return client
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("etcd did not serve within %s\n%s", etcdStartTimeout, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// memberTLS is the client TLS of the certificate name in certs (a folder
// of tooldispatch cluster certs).
func memberTLS(certs, name string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(certs, name+".pem"), filepath.Join(certs, name+"-key.pem"))
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(filepath.Join(certs, "ca.pem"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
