package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
)

// makeCerts runs "tooldispatch cluster certs" for the members named, in
// dir, on loopback.
func makeCerts(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		var out, errb bytes.Buffer
		e := &env{stdout: &out, stderr: &errb}
		if code := e.main([]string{"cluster", "certs", "--dir", dir, "--host", "127.0.0.1,localhost", n}); code != exitOK {
			t.Fatalf("cluster certs %s: exit %d: %s", n, code, errb.String())
		}
		if !strings.Contains(out.String(), "cert_file = ") {
			t.Fatalf("cluster certs printed %q", out.String())
		}
	}
}

// clusterTLSConfig writes a [cluster] section naming member name's files
// in dir and loads it.
func clusterTLSConfig(t *testing.T, dir, name string) *fileConfig {
	t.Helper()
	cfg, err := loadConfig(writeConfig(t, "[cluster]\nca_file = \""+filepath.Join(dir, "ca.pem")+"\"\ncert_file = \""+
		filepath.Join(dir, name+".pem")+"\"\nkey_file = \""+filepath.Join(dir, name+"-key.pem")+"\"\n"), t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// handshake runs a TLS handshake between a client and a server config over
// a loopback connection and returns the client's and the server's errors.
func handshake(t *testing.T, client, server *tls.Config) (cerr, serr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		err = tc.Handshake()
		if err == nil {
			_, err = io.ReadFull(tc, make([]byte, 1))
		}
		done <- err
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err == nil {
		// TLS 1.3: a refused client certificate shows on the first exchange.
		_, err = c.Write([]byte{1})
		if err == nil {
			_, err = c.Read(make([]byte, 1))
			if errors.Is(err, io.EOF) {
				err = nil
			}
		}
		c.Close()
	}
	return err, <-done
}

// testConfigClusterTLS: [cluster] ca_file, cert_file and key_file give the
// member mutual TLS: its server side takes a member of the same CA and
// refuses a client without a certificate or with one of another CA; the
// three keys go together; a member whose cluster port is not loopback, or
// that has a token, refuses to start without them, naming the keys.
func testConfigClusterTLS(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	makeCerts(t, dir, "m0", "m1")
	makeCerts(t, other, "x0")
	o := &options{clusterAddr: "127.0.0.1:7000"}
	m0, err := clusterTLS(o, clusterTLSConfig(t, dir, "m0"))
	if err != nil || m0 == nil {
		t.Fatalf("loading m0's TLS: %v", err)
	}
	m1, err := clusterTLS(o, clusterTLSConfig(t, dir, "m1"))
	if err != nil {
		t.Fatal(err)
	}
	x0, err := clusterTLS(o, clusterTLSConfig(t, other, "x0"))
	if err != nil {
		t.Fatal(err)
	}
	if cerr, serr := handshake(t, m1.Client, m0.Server); cerr != nil || serr != nil {
		t.Errorf("member to member: client %v, server %v", cerr, serr)
	}
	noCert := m1.Client.Clone()
	noCert.Certificates = nil
	if _, serr := handshake(t, noCert, m0.Server); serr == nil {
		t.Error("a client without a certificate was taken")
	}
	foreign := x0.Client.Clone()
	foreign.RootCAs = m0.Client.RootCAs // it trusts the cluster, the cluster does not trust it
	if _, serr := handshake(t, foreign, m0.Server); serr == nil {
		t.Error("a client with a certificate of another CA was taken")
	}
	if cerr, _ := handshake(t, m1.Client, x0.Server); cerr == nil {
		t.Error("a member dialled a server with a certificate of another CA")
	}

	if _, err := loadConfig(writeConfig(t, "[cluster]\nca_file = \"ca.pem\"\n"), t.TempDir(), zerolog.Nop()); err == nil ||
		!strings.Contains(err.Error(), "cluster.cert_file") {
		t.Errorf("ca_file alone: %v, want an error naming the three keys", err)
	}
	bad := clusterTLSConfig(t, dir, "m0")
	bad.Cluster.KeyFile = filepath.Join(other, "x0-key.pem")
	if _, err := clusterTLS(o, bad); err == nil || !strings.Contains(err.Error(), "[cluster]") {
		t.Errorf("m0's certificate with x0's key: %v, want an error naming [cluster]", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad = clusterTLSConfig(t, dir, "m0")
	bad.Cluster.CAFile = empty
	if _, err := clusterTLS(o, bad); err == nil {
		t.Error("an empty CA file was accepted")
	}

	for _, tc := range []struct {
		name string
		o    options
		want string // "" for no error
	}{
		{"loopback without a token", options{clusterAddr: "127.0.0.1:7000"}, ""},
		{"localhost without a token", options{clusterAddr: "localhost:7000"}, ""},
		{"another host", options{clusterAddr: "10.1.2.3:7000"}, "--cluster-addr 10.1.2.3:7000 is not loopback"},
		{"every interface", options{clusterAddr: ":7000"}, "is not loopback"},
		{"a token", options{clusterAddr: "127.0.0.1:7000", token: "s3cret"}, "has a --token"},
	} {
		got, err := clusterTLS(&tc.o, &fileConfig{})
		switch {
		case tc.want == "" && (err != nil || got != nil):
			t.Errorf("%s: %v %v, want plain", tc.name, got, err)
		case tc.want != "" && (err == nil || !errors.Is(err, errClusterTLSRequired) || !strings.Contains(err.Error(), tc.want) ||
			!strings.Contains(err.Error(), "[cluster] ca_file, cert_file and key_file")):
			t.Errorf("%s: %v, want a refusal saying %q and naming the keys", tc.name, err, tc.want)
		}
	}
}

// TestServeClusterRefusesWithoutTLS: serve --cluster with a token and no
// [cluster] certificates exits 2 before it opens anything, naming the keys.
func TestServeClusterRefusesWithoutTLS(t *testing.T) {
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getwd: os.Getwd}
	code := e.main([]string{"serve", "--workspace", t.TempDir(), "--data", t.TempDir(), "--token", "s3cret",
		"--cluster", "c", "--cluster-addr", "127.0.0.1:0", "--peers", "127.0.0.1:1", "--automanage-port", "1", "--postgres", "postgres://127.0.0.1:1/x"})
	if code != exitUsage || !strings.Contains(errb.String(), "[cluster] ca_file, cert_file and key_file") {
		t.Errorf("exit %d: %s, want 2 naming [cluster] ca_file, cert_file and key_file", code, errb.String())
	}
}

// TestClusterKeyOutOfReach: the member's [cluster] certificate files, even
// inside the workspace, are tooldispatch's own: no tool reads, lists or
// changes the key.
func TestClusterKeyOutOfReach(t *testing.T) {
	ws := exampleWorkspace(t)
	certs := filepath.Join(ws, "certs")
	makeCerts(t, certs, "m0")
	config := filepath.Join(t.TempDir(), "tooldispatch.toml")
	if err := os.WriteFile(config, []byte("[cluster]\nca_file = \""+filepath.Join(certs, "ca.pem")+"\"\ncert_file = \""+
		filepath.Join(certs, "m0.pem")+"\"\nkey_file = \""+filepath.Join(certs, "m0-key.pem")+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(certs, "m0-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	res := runTurn(t, toolCallsTurn(t,
		[3]any{"r1", "read_files", map[string]any{"paths": []string{"certs/m0-key.pem"}}},
		[3]any{"e1", "edit_file", map[string]any{"path": "certs/m0-key.pem", "content": "pwned"}},
		[3]any{"e2", "edit_file", map[string]any{"path": "certs/ca.pem", "content": "pwned"}},
	), "--workspace", ws, "--data", t.TempDir(), "--config", config, "--approve", "all")
	for _, id := range []string{"r1", "e1", "e2"} {
		wantRefused(t, res, id, key)
	}
	if b, _ := os.ReadFile(filepath.Join(certs, "m0-key.pem")); !bytes.Equal(b, key) {
		t.Fatal("the member's key changed")
	}
}

// TestClusterCertsOutOfReach: "cluster certs --dir certs" run in the
// project folder writes the cluster's CA key into the workspace. It warns
// and says how to keep the key apart; every file it wrote is
// tooldispatch's own, with no [cluster] configuration naming them: no tool
// reads, lists, edits or removes them, by their names or through a
// symlink; serve started on that workspace warns of the CA key. (Commands
// run in the workspace may read it: the sandbox reports such a directory
// as exposed, docs/SECURITY.md.)
func TestClusterCertsOutOfReach(t *testing.T) {
	ws := exampleWorkspace(t)
	certs := filepath.Join(ws, "certs")
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb}
	if code := e.main([]string{"cluster", "certs", "--dir", certs, "--host", "127.0.0.1", "m0"}); code != exitOK {
		t.Fatalf("cluster certs: exit %d: %s", code, errb.String())
	}
	if w := errb.String(); !strings.Contains(w, "ca-key.pem") || !strings.Contains(w, "mint") || !strings.Contains(w, "mv ") {
		t.Errorf("cluster certs warned %q; want the CA key named, the risk and how to move it", w)
	}
	caKey, err := os.ReadFile(filepath.Join(certs, "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(certs, "ca-key.pem"), filepath.Join(ws, "innocent.txt")); err != nil {
		t.Fatal(err)
	}
	res := runTurn(t, toolCallsTurn(t,
		[3]any{"r1", "read_files", map[string]any{"paths": []string{"certs/ca-key.pem"}}},
		[3]any{"r2", "read_files", map[string]any{"paths": []string{"innocent.txt"}}},
		[3]any{"r3", "read_files", map[string]any{"paths": []string{"certs/m0-key.pem"}}},
		[3]any{"f1", "find_files", map[string]any{"pattern": "**/*.pem"}},
		[3]any{"e1", "edit_file", map[string]any{"path": "certs/ca.pem", "content": "pwned"}},
		[3]any{"d1", "remove_file", map[string]any{"path": "certs/ca-key.pem"}},
	), "--workspace", ws, "--data", t.TempDir(), "--approve", "all")
	for _, id := range []string{"r1", "r2", "r3", "e1", "d1"} {
		wantRefused(t, res, id, caKey)
	}
	if f := res["f1"]; strings.Contains(f.Content, "ca-key.pem") || strings.Contains(f.Content, "m0-key.pem") {
		t.Errorf("find_files lists the certificates' folder: %q", f.Content)
	}
	if b, err := os.ReadFile(filepath.Join(certs, "ca-key.pem")); err != nil || !bytes.Equal(b, caKey) {
		t.Fatalf("the CA key changed: %v", err)
	}

	cmd := command(t, nil, "serve", "--addr", "127.0.0.1:0", "--workspace", ws, "--data", t.TempDir())
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(pipe)
	var head strings.Builder
	for !strings.Contains(head.String(), "serving on ") {
		line, err := r.ReadString('\n')
		head.WriteString(line)
		if err != nil {
			t.Fatalf("serve ended before serving: %v\n%s", err, head.String())
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_, _ = io.Copy(io.Discard, r)
	_ = cmd.Wait()
	if h := head.String(); !strings.Contains(h, "ca-key.pem") || !strings.Contains(h, "CA key") {
		t.Errorf("serve's start:\n%s\nwant a warning of the CA key in its workspace", h)
	}
}
