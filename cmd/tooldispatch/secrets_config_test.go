package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

// TestConfigBindsSecrets: [[secrets.bind]] and an API's base_url and
// origins on [[web.apis]] decide where a secret may be sent.
func TestConfigBindsSecrets(t *testing.T) {
	t.Setenv(secrets.EnvKey, "")
	var mu sync.Mutex
	got := map[string][]string{} // server → X-Api-Key values seen
	server := func(name string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got[name] = append(got[name], r.Header.Get("X-Api-Key"))
			mu.Unlock()
		}))
		t.Cleanup(s.Close)
		return s
	}
	a, b, c, up := server("a"), server("b"), server("c"), server("upload")
	dir := t.TempDir()
	file := filepath.Join(dir, "config.toml")
	body := `[web]
allow_loopback = true

[[web.apis]]
name = "svc"
base_url = "` + c.URL + `/v1"
auth_header = "X-Api-Key"
auth_value = "${secret:SVC}"
origins = ["` + up.URL + `"]

[[secrets.bind]]
name = "K"
origins = ["` + a.URL + `"]
`
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	wsDir := t.TempDir()
	cfg, err := loadConfig(file, wsDir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := builtin.OpenWorkspace(wsDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	store := cachestore.NewMemory()
	defer store.Close()
	reg := toolkit.NewRegistry()
	ts, err := registerTools(reg, ws, store, t.TempDir(), &options{}, cfg, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	ctx := context.Background()
	for _, n := range []string{"K", "SVC"} {
		// Stored without origins: only the configuration binds them.
		if err := ts.Secrets.Put(ctx, n, "value-of-"+n, ""); err != nil {
			t.Fatal(err)
		}
	}
	httpTool, ok := reg.Lookup("http_request")
	if !ok {
		t.Fatal("no http_request")
	}
	send := func(url, secret string) error {
		raw, _ := json.Marshal(map[string]any{"url": url, "headers": map[string]string{"X-Api-Key": "${secret:" + secret + "}"}})
		args, err := toolkit.ParseArgs(string(raw), toolkit.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		_, err = httpTool.Handler(ctx, &toolkit.Call{Session: "s", Name: "http_request", Args: args, Emit: func(string) {}})
		return err
	}
	for _, tt := range []struct {
		url, secret string
		ok          bool
	}{
		{a.URL + "/x", "K", true},
		{b.URL + "/x", "K", false},
		{c.URL + "/x", "K", false},
		{c.URL + "/v1/x", "SVC", true},
		{up.URL + "/x", "SVC", true},
		{a.URL + "/x", "SVC", false},
	} {
		err := send(tt.url, tt.secret)
		if tt.ok && err != nil {
			t.Errorf("%s to %s: %v", tt.secret, tt.url, err)
		}
		if !tt.ok && !errors.Is(err, secrets.ErrOrigin) && (err == nil || !strings.Contains(err.Error(), "may only be sent to")) {
			t.Errorf("%s to %s: %v, want a refusal", tt.secret, tt.url, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got["b"]) != 0 || strings.Join(got["a"], ",") != "value-of-K" || strings.Join(got["c"], ",") != "value-of-SVC" ||
		strings.Join(got["upload"], ",") != "value-of-SVC" {
		t.Errorf("servers saw %v", got)
	}
}

func TestConfigSecretBindErrors(t *testing.T) {
	dir := t.TempDir()
	for i, tt := range []struct{ body, want string }{
		{"[[secrets.bind]]\nname = \"K\"\norigins = [\"https://a.example/path\"]\n", "secrets.bind[0].origins"},
		{"[[secrets.bind]]\nname = \"K\"\n", "lists no origins"},
		{"[[secrets.bind]]\nname = \"a b\"\norigins = [\"https://a.example\"]\n", "not a valid secret name"},
		{"[[secrets.bind]]\nname = \"K\"\norigin = [\"https://a.example\"]\n", "unknown keys: secrets.bind.origin"},
		{"[[web.apis]]\nname = \"x\"\nbase_url = \"https://a.example\"\nauth_header = \"X\"\norigins = [\"ftp://a\"]\n", "apis[0].origins"},
	} {
		p := filepath.Join(dir, "c"+string(rune('0'+i))+".toml")
		if err := os.WriteFile(p, []byte(tt.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := loadConfig(p, t.TempDir(), zerolog.Nop())
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.body, err, tt.want)
		}
	}
}
