package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
	"github.com/tooldispatch/tooldispatch/toolkit/web"
)

// TestSecretNeverLeaks stores a secret through store_secret (the human
// answers over the dispatcher's question channel), uses it in an
// http_request header against a loopback server that echoes the request
// back, and tries to print it through an error and run_command; then
// searches every event, result, log line, the persisted session and the
// Badger files for the secret's bytes.
func TestSecretNeverLeaks(t *testing.T) {
	const secret = "s3cr3t-VALUE-9f8e7d6c5b4a"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/deny" {
			http.Error(w, "forbidden: bad token "+r.Header.Get("X-Api-Key"), http.StatusForbidden)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"headers": r.Header, "url": r.URL.String()})
	}))
	defer echo.Close()

	dataDir := t.TempDir()
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := zerolog.New(zerolog.SyncWriter(lockedWriter{&logs, &logMu})).Level(zerolog.TraceLevel)
	store, err := cachestore.OpenBadger(cachestore.BadgerOptions{Dir: dataDir, Small: true, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := secrets.Open(store, filepath.Join(dataDir, "secret.key"), logger)
	if err != nil {
		t.Fatal(err)
	}
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	reg.Register(secrets.StoreSecretTool(sec))
	w := web.Register(reg, web.Deps{Config: web.Config{AllowLoopback: true}, Cache: web.CacheFromStore(store), Secrets: sec, Logger: logger})
	defer w.Close()

	var mu sync.Mutex
	var events []*messages.Event
	var d *actors.Dispatcher
	d, err = actors.New(actors.Config{Registry: reg, Store: store, Logger: logger, Redact: sec.Redactor().Redact,
		Events: func(e *messages.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
			if e.Kind == toolkit.QuestionSecret {
				go func() { _ = d.Answer(context.Background(), e.Session, e.CallId, secret, false) }()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	dispatch := func(calls ...*messages.ToolCall) *messages.TurnResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err := d.Dispatch(ctx, &messages.DispatchTurn{Session: "sec", Run: "r", Provider: "claude-code", Approve: "all",
			AutoLoadSchemas: true, Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: calls}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	mk := func(id, name string, args any) *messages.ToolCall {
		b, _ := json.Marshal(args)
		return &messages.ToolCall{Id: id, Type: "function", Function: &messages.FunctionCall{Name: name, Arguments: string(b)}}
	}
	r := dispatch(mk("store", "store_secret", map[string]any{"name": "API_TOKEN", "description": "echo service"}))
	if r.Messages[0].Status != "ok" {
		t.Fatalf("store_secret: %+v", r.Messages[0])
	}
	r = dispatch(
		mk("get", "http_request", map[string]any{"method": "GET", "url": echo.URL + "/echo?token=${secret:API_TOKEN}", "headers": map[string]string{"X-Api-Key": "${secret:API_TOKEN}"}}),
		mk("post", "http_request", map[string]any{"method": "POST", "url": echo.URL + "/echo", "body": "token=${secret:API_TOKEN}", "headers": map[string]string{"Authorization": "Bearer ${secret:API_TOKEN}"}}),
		mk("deny", "http_request", map[string]any{"method": "GET", "url": echo.URL + "/deny", "headers": map[string]string{"X-Api-Key": "${secret:API_TOKEN}"}}),
		mk("missing", "http_request", map[string]any{"method": "GET", "url": echo.URL + "/echo", "headers": map[string]string{"X-Api-Key": "${secret:NOPE}"}}),
	)
	if r.Messages[0].Status != "ok" || !strings.Contains(r.Messages[0].Content, "[secret:API_TOKEN]") {
		t.Fatalf("the echo did not come back redacted: %+v", r.Messages[0])
	}
	if r.Messages[2].Status != "error" || !strings.Contains(r.Messages[2].Content, "403") || !strings.Contains(r.Messages[2].Content, "store_secret") {
		t.Errorf("403 result: %+v", r.Messages[2])
	}
	if r.Messages[3].Status != "error" || !strings.Contains(r.Messages[3].Content, `secret "NOPE" not found`) {
		t.Errorf("missing secret: %+v", r.Messages[3])
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	turns, err := store.Turns(context.Background(), "sec")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	check := func(where, text string) {
		t.Helper()
		if strings.Contains(text, secret) {
			t.Errorf("the secret appears in %s", where)
		}
	}
	mu.Lock()
	for _, e := range events {
		b, _ := json.Marshal(e)
		check("event "+e.Kind, string(b))
	}
	mu.Unlock()
	for _, m := range r.Messages {
		check("result "+m.ToolCallId, m.Content)
	}
	for _, tr := range turns {
		b, _ := json.Marshal(tr)
		check("persisted turn", string(b))
	}
	logMu.Lock()
	check("logs", logs.String())
	logMu.Unlock()
	err = filepath.Walk(dataDir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("the secret is in the data file %s unencrypted", filepath.Base(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
