package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
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
	store, err := badger.Open(badger.Options{Dir: dataDir, Small: true, Logger: logger})
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
	d, err = actors.New(actors.Config{Registry: reg, Store: store, Logger: logger, Redactor: sec.Redactor(),
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
	r := dispatch(mk("store", "store_secret", map[string]any{"name": "API_TOKEN", "description": "echo service", "origins": []string{echo.URL}}))
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

// TestSecretBoundToOrigin: through the dispatcher, under approve "none",
// a secret stored by store_secret (the model proposes two loopback
// origins, the human keeps one) reaches that origin with a read-only GET,
// and reaches the other by no route: URL, path, query, header, body,
// HEAD or a redirect. A GET that carries a body or a method override is
// not read-only, so under "none" it does not run at all.
func TestSecretBoundToOrigin(t *testing.T) {
	const secret = "b0und-SECRET-7a6b5c4d3e2f"
	var aMu sync.Mutex
	var aSaw []string
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		aMu.Lock()
		aSaw = append(aSaw, r.Method+" "+r.URL.Path+" "+r.Header.Get("X-Api-Key"))
		aMu.Unlock()
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("hello from A\n"))
	}))
	defer a.Close()
	var bMu sync.Mutex
	var bSaw []string
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := make([]byte, 1<<16)
		n, _ := r.Body.Read(body)
		bMu.Lock()
		bSaw = append(bSaw, r.Method+" "+r.URL.String()+" "+strings.Join(headerValues(r.Header), " ")+" "+string(body[:n]))
		bMu.Unlock()
		_, _ = w.Write([]byte("hello from B\n"))
	}))
	defer b.Close()

	dataDir := t.TempDir()
	store, err := badger.Open(badger.Options{Dir: dataDir, Small: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	t.Setenv(secrets.EnvKey, "")
	sec, err := secrets.Open(store, filepath.Join(dataDir, "secret.key"), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	reg := toolkit.NewRegistry()
	toolkit.RegisterMeta(reg)
	reg.Register(secrets.StoreSecretTool(sec))
	w := web.Register(reg, web.Deps{Config: web.Config{AllowLoopback: true}, Secrets: sec})
	defer w.Close()

	var mu sync.Mutex
	var question string
	var d *actors.Dispatcher
	d, err = actors.New(actors.Config{Registry: reg, Store: store, Logger: zerolog.Nop(), Redactor: sec.Redactor(),
		Events: func(e *messages.Event) {
			if e.Kind == toolkit.QuestionSecret {
				mu.Lock()
				question = e.Text
				mu.Unlock()
				// The human keeps only A of the two origins proposed.
				go func() {
					_ = d.AnswerWith(context.Background(), e.Session, e.CallId, toolkit.Answer{Text: secret, Origins: []string{a.URL}})
				}()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	dispatch := func(approve string, calls ...*messages.ToolCall) *messages.TurnResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err := d.Dispatch(ctx, &messages.DispatchTurn{Session: "bound", Run: "r", Provider: "claude-code", Approve: approve,
			AutoLoadSchemas: true, Message: &messages.AssistantMessage{Role: "assistant", ToolCalls: calls}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	mk := func(id, name string, args any) *messages.ToolCall {
		raw, _ := json.Marshal(args)
		return &messages.ToolCall{Id: id, Type: "function", Function: &messages.FunctionCall{Name: name, Arguments: string(raw)}}
	}
	key := map[string]string{"X-Api-Key": "${secret:K}"}

	r := dispatch("all", mk("store", "store_secret", map[string]any{"name": "K", "origins": []string{a.URL, b.URL}}))
	if r.Messages[0].Status != "ok" {
		t.Fatalf("store_secret: %+v", r.Messages[0])
	}
	mu.Lock()
	if !strings.Contains(question, strings.TrimPrefix(a.URL, "http://")) || !strings.Contains(question, strings.TrimPrefix(b.URL, "http://")) {
		t.Errorf("the question does not show both proposed origins: %q", question)
	}
	mu.Unlock()

	r = dispatch("none",
		mk("a-get", "http_request", map[string]any{"url": a.URL + "/data", "headers": key}),
		mk("b-query", "http_request", map[string]any{"url": b.URL + "/x?k=${secret:K}"}),
		mk("b-path", "http_request", map[string]any{"url": b.URL + "/x/${secret:K}"}),
		mk("b-header", "http_request", map[string]any{"url": b.URL + "/x", "headers": key}),
		mk("b-head", "http_request", map[string]any{"url": b.URL + "/x", "method": "HEAD", "headers": key}),
		mk("b-body", "http_request", map[string]any{"url": b.URL + "/x", "body": "k=${secret:K}"}),
		mk("a-to-b", "http_request", map[string]any{"url": a.URL + "/r?to=" + url.QueryEscape(b.URL+"/landing"), "headers": key}),
		mk("a-body", "http_request", map[string]any{"url": a.URL + "/body", "body": "{}"}),
		mk("a-override", "http_request", map[string]any{"url": a.URL + "/override", "headers": map[string]string{"X-HTTP-Method-Override": "DELETE"}}),
	)
	status := map[string]*messages.ToolMessage{}
	for _, m := range r.Messages {
		status[m.ToolCallId] = m
		if strings.Contains(m.Content, secret) {
			t.Errorf("%s: the result holds the secret", m.ToolCallId)
		}
	}
	if m := status["a-get"]; m.Status != "ok" || !strings.Contains(m.Content, "hello from A") {
		t.Errorf("GET to the bound origin under approve none: %+v", m)
	}
	for _, id := range []string{"b-query", "b-path", "b-header", "b-head"} {
		if m := status[id]; m.Status != "error" || !strings.Contains(m.Content, "may only be sent to") {
			t.Errorf("%s: %+v", id, m)
		}
	}
	if m := status["b-body"]; m.Status == "ok" {
		t.Errorf("a GET with a body ran under approve none: %+v", m)
	}
	if m := status["a-to-b"]; m.Status != "ok" || !strings.Contains(m.Content, "HTTP 302") {
		t.Errorf("redirect to B: %+v", m)
	}
	for _, id := range []string{"a-body", "a-override"} {
		if m := status[id]; m.Status == "ok" || m.Status == "error" {
			t.Errorf("%s ran under approve none: %+v", id, m)
		}
	}
	aMu.Lock()
	slices.Sort(aSaw) // the calls run concurrently
	want := []string{"GET /data " + secret, "GET /r " + secret}
	if strings.Join(aSaw, "|") != strings.Join(want, "|") {
		t.Errorf("A saw %q, want %q", aSaw, want)
	}
	aMu.Unlock()
	bMu.Lock()
	for _, req := range bSaw {
		if strings.Contains(req, secret) || strings.Contains(req, url.QueryEscape(secret)) {
			t.Errorf("B got the secret: %s", req)
		}
	}
	if len(bSaw) != 0 {
		t.Errorf("B got requests: %q", bSaw)
	}
	bMu.Unlock()
}

// headerValues lists "Name: value" for every header of h.
func headerValues(h http.Header) []string {
	var out []string
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, k+": "+v)
		}
	}
	return out
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
