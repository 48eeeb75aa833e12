package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClusterCertsForTheService: "cluster certs --service" makes a service
// port's certificate: server authentication only, naming the hosts given,
// signed by the services' own CA (made once, its key 0600 and warned of
// when it lies in DIR, or taken from --ca-key), never by the cluster's; the
// cluster's mutual TLS refuses it as a member; the printed keys serve
// HTTPS that a client trusting service-ca.pem reaches, and serve warns of
// the CA key in its workspace.
func TestClusterCertsForTheService(t *testing.T) {
	ws := t.TempDir()
	dir := filepath.Join(ws, "certs")
	certsCmd := func(args ...string) (code int, stdout, stderr string) {
		var out, errb strings.Builder
		e := &env{stdout: &out, stderr: &errb}
		code = e.main(append([]string{"cluster", "certs"}, args...))
		return code, out.String(), errb.String()
	}
	code, out, warn := certsCmd("--service", "--dir", dir, "--host", "127.0.0.1,localhost", "web")
	if code != exitOK {
		t.Fatalf("cluster certs --service: exit %d: %s", code, warn)
	}
	certFile, keyFile := filepath.Join(dir, "web-service.pem"), filepath.Join(dir, "web-service-key.pem")
	if want := fmt.Sprintf("cert_file = %q\nkey_file = %q\n", certFile, keyFile); out != want {
		t.Errorf("cluster certs --service printed %q, want %q", out, want)
	}
	if !strings.Contains(warn, "service-ca-key.pem") || !strings.Contains(warn, "mint") || !strings.Contains(warn, "mv ") {
		t.Errorf("cluster certs --service warned %q; want the CA key named, the risk and how to move it", warn)
	}
	for _, f := range []string{"service-ca-key.pem", "web-service-key.pem"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want mode 0600", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".tooldispatch-own")); err != nil {
		t.Errorf("the folder is not marked as tooldispatch's own: %v", err)
	}
	readCert := func(path string) *x509.Certificate {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		if blk == nil {
			t.Fatalf("%s is not PEM", path)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	leaf := readCert(certFile)
	if len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("the service's certificate has usages %v, want server authentication only", leaf.ExtKeyUsage)
	}
	if len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "localhost" {
		t.Errorf("the service's certificate names %v %v, want 127.0.0.1 and localhost", leaf.IPAddresses, leaf.DNSNames)
	}
	servicePool := x509.NewCertPool()
	servicePool.AddCert(readCert(filepath.Join(dir, "service-ca.pem")))
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: servicePool, DNSName: "localhost"}); err != nil {
		t.Errorf("the service's certificate does not verify against service-ca.pem: %v", err)
	}

	// A member of a cluster whose CA lies in the same folder: the
	// service's certificate is not the cluster's, and its mutual TLS
	// refuses it.
	makeCerts(t, dir, "m0")
	clusterPool := x509.NewCertPool()
	clusterPool.AddCert(readCert(filepath.Join(dir, "ca.pem")))
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: clusterPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
		t.Error("the service's certificate verifies against the cluster's CA")
	}
	m0, err := clusterTLS(&options{clusterAddr: "127.0.0.1:7000"}, clusterTLSConfig(t, dir, "m0"))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, serr := handshake(t, &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: clusterPool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}, m0.Server); serr == nil {
		t.Error("the cluster's port took the service's certificate as a member's")
	}

	// A second service's certificate: the same CA.
	caBefore, err := os.ReadFile(filepath.Join(dir, "service-ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if code, _, warn := certsCmd("--service", "--dir", dir, "--host", "127.0.0.1", "api"); code != exitOK {
		t.Fatalf("a second service: exit %d: %s", code, warn)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "service-ca.pem")); string(after) != string(caBefore) {
		t.Error("the services' CA was made again")
	}
	if _, err := readCert(filepath.Join(dir, "api-service.pem")).Verify(x509.VerifyOptions{Roots: servicePool, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("the second service's certificate: %v", err)
	}

	// The CA key kept elsewhere: no warning.
	caKey := filepath.Join(t.TempDir(), "service-ca-key.pem")
	if code, _, warn := certsCmd("--service", "--dir", filepath.Join(t.TempDir(), "other"), "--ca-key", caKey, "--host", "127.0.0.1", "web"); code != exitOK || warn != "" {
		t.Errorf("--ca-key outside the folder: exit %d, stderr %q; want 0 and no warning", code, warn)
	}

	// The printed keys serve HTTPS to a client that trusts service-ca.pem.
	config := writeConfig(t, "[service]\n"+out)
	s := startServe(t, "--config", config, "--workspace", ws, "--data", t.TempDir())
	if !strings.Contains(s.startup, "a service CA key lies in the workspace") || !strings.Contains(s.startup, "service-ca-key.pem") {
		t.Errorf("serve's start:\n%s\nwant a warning of the service CA key in its workspace", s.startup)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: servicePool}}}
	resp, err := hc.Get(s.base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(s.base, "https://") {
		t.Errorf("GET %s/healthz: %d", s.base, resp.StatusCode)
	}
}
