package web

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

func newDownloadWeb(t *testing.T, maxBytes int64) (*Web, string) {
	t.Helper()
	dir := t.TempDir()
	ws, err := builtin.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	deps := testDeps(newFakeClock())
	deps.Workspace = ws
	deps.Config.DownloadMaxBytes = maxBytes
	deps.Secrets = openSecrets(t, map[string]string{"TOKEN": tokenValue})
	return newWeb(t, deps), ws.Dir()
}

func TestDownloadFile(t *testing.T) {
	s := newSite(t)
	w, dir := newDownloadWeb(t, 0)
	if err := w.secrets.Bind("TOKEN", s.URL); err != nil {
		t.Fatal(err)
	}

	res, err := call(t, w, DownloadFileName, "s1", obj{"url": s.URL + "/article", "path": "pages/tomatoes.html"})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(articleHTML))
	mustContain(t, res.Content, "Saved pages/tomatoes.html", "text/html", "from "+s.URL+"/article", "sha256: "+hex.EncodeToString(sum[:]))
	got, err := os.ReadFile(filepath.Join(dir, "pages", "tomatoes.html"))
	if err != nil || string(got) != articleHTML {
		t.Fatalf("saved file: %v", err)
	}

	_, err = call(t, w, DownloadFileName, "s1", obj{"url": s.URL + "/json", "path": "pages/tomatoes.html"})
	wantErr(t, err, "already exists", "overwrite")
	res, err = call(t, w, DownloadFileName, "s1", obj{"url": s.URL + "/json", "path": "pages/tomatoes.html", "overwrite": true})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.Content, "Replaced pages/tomatoes.html")
	if got, _ := os.ReadFile(filepath.Join(dir, "pages", "tomatoes.html")); !strings.Contains(string(got), `"stars":42`) {
		t.Errorf("not replaced: %q", got)
	}

	// A secret in a header is sent and kept out of the result.
	res, err = call(t, w, DownloadFileName, "s1", obj{"url": s.URL + "/echo", "path": "echo.txt", "headers": obj{"Authorization": "Bearer ${secret:TOKEN}"}})
	if err != nil {
		t.Fatal(err)
	}
	if h := s.headers().Get("Authorization"); h != "Bearer "+tokenValue {
		t.Errorf("server saw %q", h)
	}
	mustNotContain(t, res.Content, tokenValue)

	tests := []struct {
		name string
		args obj
		want []string
	}{
		{"outside the workspace", obj{"url": s.URL + "/json", "path": "../escape.json"}, []string{"outside the workspace"}},
		{"absolute elsewhere", obj{"url": s.URL + "/json", "path": "/etc/passwd"}, []string{"outside the workspace"}},
		{"the workspace itself", obj{"url": s.URL + "/json", "path": "."}, []string{"workspace directory"}},
		{"data directory", obj{"url": s.URL + "/json", "path": ".tooldispatch/x"}, []string{"data directory"}},
		{"a directory", obj{"url": s.URL + "/json", "path": "pages", "overwrite": true}, []string{"is a directory"}},
		{"not found", obj{"url": s.URL + "/status/404", "path": "missing.json"}, []string{"HTTP 404 Not Found"}},
		{"unauthorized", obj{"url": s.URL + "/status/401", "path": "missing.json"}, []string{"HTTP 401 Unauthorized", "store_secret"}},
		{"blocked address", obj{"url": "http://169.254.169.254/latest", "path": "meta.txt"}, []string{"cloud metadata"}},
		{"missing secret", obj{"url": s.URL + "/json", "path": "x.json", "headers": obj{"X-Api-Key": "${secret:NOPE}"}}, []string{`secret "NOPE" not found`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, w, DownloadFileName, "s1", tt.args)
			wantErr(t, err, tt.want...)
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.json")); !os.IsNotExist(err) {
		t.Errorf("a failed download left a file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape.json")); !os.IsNotExist(err) {
		t.Error("a download escaped the workspace")
	}
	assertNoTempFiles(t, dir)
}

func TestDownloadFileSizeCap(t *testing.T) {
	s := newSite(t)
	w, dir := newDownloadWeb(t, 64<<10)
	for _, path := range []string{"/huge", "/huge-declared"} {
		_, err := call(t, w, DownloadFileName, "s1", obj{"url": s.URL + path, "path": "big.bin"})
		wantErr(t, err, "larger than the 64.0 KiB limit")
	}
	if _, err := os.Stat(filepath.Join(dir, "big.bin")); !os.IsNotExist(err) {
		t.Errorf("an oversized download left a file: %v", err)
	}
	assertNoTempFiles(t, dir)
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".download-") {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}
