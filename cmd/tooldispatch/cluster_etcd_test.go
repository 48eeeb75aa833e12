package main

import (
	"bytes"
	"net"
	"os"
	"strings"
	"testing"
)

// TestServeClusterEtcdUnreachable: a member given an etcd that does not
// answer exits 3 naming --etcd and the endpoint, before it opens the shared
// store or joins (protoactor's etcd provider waits for etcd without end,
// saying nothing).
func TestServeClusterEtcdUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String()
	ln.Close() // a port that refuses connections: no etcd there
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getwd: os.Getwd}
	code := e.main([]string{"serve", "--workspace", t.TempDir(), "--data", t.TempDir(), "--addr", "127.0.0.1:0",
		"--cluster", "c", "--cluster-addr", "127.0.0.1:0", "--etcd", endpoint, "--postgres", "postgres://127.0.0.1:1/x"})
	if code != exitFailure || !strings.Contains(errb.String(), "--etcd") || !strings.Contains(errb.String(), endpoint) {
		t.Errorf("exit %d: %s, want 3 naming --etcd and %s", code, errb.String(), endpoint)
	}
}
