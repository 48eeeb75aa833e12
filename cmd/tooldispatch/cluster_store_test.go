package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestServeClusterWithoutPostgres: a member without the shared store's URL
// is a usage mistake (exit 2), and the message names the ways to give it
// that keep the password out of the process list first.
func TestServeClusterWithoutPostgres(t *testing.T) {
	t.Setenv("TOOLDISPATCH_PG_URL", "")
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getwd: os.Getwd}
	code := e.main([]string{"serve", "--workspace", t.TempDir(), "--data", t.TempDir(), "--addr", "127.0.0.1:0",
		"--cluster", "c", "--cluster-addr", "127.0.0.1:0", "--peers", "127.0.0.1:1", "--automanage-port", "1"})
	if code != exitUsage || !strings.Contains(errb.String(), "--postgres-file FILE or $TOOLDISPATCH_PG_URL") {
		t.Errorf("exit %d: %s, want 2 naming --postgres-file FILE or $TOOLDISPATCH_PG_URL", code, errb.String())
	}
}
