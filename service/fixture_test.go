package service

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
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
	"github.com/tooldispatch/tooldispatch/cachestore/badger"
	"github.com/tooldispatch/tooldispatch/cachestore/space"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
)

// testTimeout bounds every wait of a test on the service.
const testTimeout = 60 * time.Second

// fixtureOpts varies the service a test gets.
type fixtureOpts struct {
	token         string
	allowOrigins  []string
	maxBody       int64
	replies       Replies
	watchdogGrace time.Duration
	brokerOpts    BrokerOptions
	tools         []toolkit.Tool // registered besides the built-in tools
	// The operator's policy (Options.Approve, Exclude, AutoLoadSchemas);
	// approve defaults to all, so a body's approve decides.
	approve  string
	exclude  []string
	autoLoad bool
	// wrapStore wraps the store the dispatcher writes through, and
	// history the store the service reads (Options.Store).
	wrapStore func(cachestore.Store) cachestore.Store
	history   func(cachestore.Store) cachestore.History
	// mount, when set (like "/agent"), serves the handler under that
	// prefix of an http.ServeMux of the test's own, the way an embedder
	// mounts it; f.url then ends with the prefix. It defaults to
	// mountPrefix.
	mount string
	// cluster and redirect are Options.Cluster and Options.Redirect.
	cluster  Placement
	redirect bool
	// logger is the service's logger (Options.Logger); none by default.
	logger zerolog.Logger
	// space is Options.Space; the dispatcher's store is wrapped by it too.
	space *space.Guard
	// answered is Options.TurnAnswered.
	answered func(session string, turn int64, code int, summary string)
	// observe, when set, sees every request the server gets, before it is
	// served.
	observe func(*http.Request)
}

// mountPrefix is the mount of every fixture that sets none; TestMountedInOwnMux
// sets it while it reruns other tests (no test here is parallel).
var mountPrefix string

// overTLS makes every fixture serve HTTPS, with a certificate of a CA the
// test made, through CertFiles as serve does; TestOverTLS sets it while it
// reruns other tests.
var overTLS bool

// browserSPKI, while a fixture serves HTTPS, is the base64 SHA-256 of its
// certificate's public key, which newBrowser tells Chromium to trust.
var browserSPKI string

// fixture is a whole service on a loopback port: real built-in tools in a
// temporary workspace, real Badger in a temporary directory, the real
// dispatcher, broker and metrics.
type fixture struct {
	t       *testing.T
	dir     string
	ws      *builtin.Workspace
	store   *badger.Store
	reg     *toolkit.Registry
	broker  *Broker
	metrics *Metrics
	disp    *actors.Dispatcher
	srv     *Server
	hs      *httptest.Server
	url     string
	token   string // sent as the bearer token by request; "" for none
	secret  string // the server's token (Options.Token)
	client  *http.Client
}

// workspaceFiles are the files of every test workspace.
var workspaceFiles = map[string]string{
	"notes.md": "# Notes\nThe answer is 42.\n",
	"data.csv": "a,b\n1,2\n",
}

func newFixture(t *testing.T, o fixtureOpts) *fixture {
	t.Helper()
	dir := t.TempDir()
	for name, content := range workspaceFiles {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{t: t, dir: dir, token: o.token, secret: o.token}
	var err error
	if f.ws, err = builtin.OpenWorkspace(dir); err != nil {
		t.Fatal(err)
	}
	if f.store, err = badger.Open(badger.TestOptions(t.TempDir())); err != nil {
		f.ws.Close()
		t.Fatal(err)
	}
	f.reg = toolkit.NewRegistry()
	toolkit.RegisterMeta(f.reg)
	builtin.Register(f.reg, builtin.Deps{Workspace: f.ws, Versions: f.store})
	for _, tool := range o.tools {
		f.reg.Register(tool)
	}
	f.broker = NewBroker(o.brokerOpts)
	f.metrics = NewMetrics(f.reg)
	var dstore cachestore.Store = f.store
	if o.wrapStore != nil {
		dstore = o.wrapStore(f.store)
	}
	if o.space != nil {
		dstore = o.space.Wrap(dstore)
	}
	if f.disp, err = actors.New(actors.Config{
		Registry: f.reg, Store: dstore, Events: f.broker.Publish, Observer: f.metrics,
		Logger: zerolog.Nop(), WatchdogGrace: o.watchdogGrace,
	}); err != nil {
		f.store.Close()
		f.ws.Close()
		t.Fatal(err)
	}
	var hist cachestore.History = f.store
	if o.history != nil {
		hist = o.history(f.store)
	}
	if f.srv, err = New(Options{
		Dispatcher: f.disp, Registry: f.reg, Store: hist, Broker: f.broker, Metrics: f.metrics,
		Token: o.token, AllowOrigins: o.allowOrigins, MaxBodyBytes: o.maxBody, Replies: o.replies,
		Approve: cmp.Or(o.approve, actors.ApproveAll), Exclude: o.exclude, AutoLoadSchemas: o.autoLoad,
		Cluster: o.cluster, Redirect: o.redirect, Logger: o.logger, Space: o.space, TurnAnswered: o.answered,
	}); err != nil {
		f.close()
		t.Fatal(err)
	}
	var h http.Handler = f.srv.Handler()
	if o.observe != nil {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			o.observe(r)
			inner.ServeHTTP(w, r)
		})
	}
	mount := cmp.Or(o.mount, mountPrefix)
	if mount != "" {
		mux := http.NewServeMux()
		mux.Handle(mount+"/", http.StripPrefix(mount, h))
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "the embedder's own page", http.StatusTeapot)
		})
		h = mux
	}
	if overTLS {
		f.serveTLS(h)
	} else {
		f.hs = httptest.NewServer(h)
		f.client = f.hs.Client()
	}
	f.url = f.hs.URL + mount
	t.Cleanup(f.close)
	return f
}

// serveTLS serves h over HTTPS on a loopback port the way serve does: the
// listener wrapped by tls.NewListener with CertFiles' configuration, here
// over files of a certificate a CA of the test's own signed. The fixture's
// client trusts that CA alone; hs.URL is the https address.
func (f *fixture) serveTLS(h http.Handler) {
	t := f.t
	ca := newTestCA(t)
	pair := ca.issue(t, time.Now().Add(-time.Hour))
	certFile, keyFile := filepath.Join(t.TempDir(), "service.pem"), filepath.Join(t.TempDir(), "service-key.pem")
	pair.write(t, certFile, keyFile)
	certs, err := LoadCertFiles(certFile, keyFile, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	f.hs = httptest.NewUnstartedServer(h)
	f.hs.Listener = tls.NewListener(f.hs.Listener, certs.TLSConfig())
	f.hs.Start()
	f.hs.URL = "https://" + f.hs.Listener.Addr().String()
	f.client = &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: ca.pool},
		ForceAttemptHTTP2: true,
	}}
	browserSPKI = pair.spki
	t.Cleanup(func() {
		browserSPKI = ""
		f.client.CloseIdleConnections()
	})
}

// close shuts everything down in the order the serve command does.
func (f *fixture) close() {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if f.srv != nil {
		if err := f.srv.Shutdown(ctx); err != nil {
			f.t.Errorf("Server.Shutdown: %v", err)
		}
	}
	if err := f.disp.Close(ctx); err != nil {
		f.t.Errorf("Dispatcher.Close: %v", err)
	}
	if f.hs != nil {
		f.hs.Close()
	}
	if err := f.store.Close(); err != nil {
		f.t.Errorf("closing the store: %v", err)
	}
	if err := f.ws.Close(); err != nil {
		f.t.Errorf("closing the workspace: %v", err)
	}
}

// request sends a request with the fixture's token (if any) and returns the
// response with its body read.
func (f *fixture) request(ctx context.Context, method, path string, body any, header http.Header) (*http.Response, []byte) {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.url+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return resp, data
}

// do is request with a bounded context.
func (f *fixture) do(method, path string, body any) (*http.Response, []byte) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	return f.request(ctx, method, path, body, nil)
}

// postTurn dispatches a turn and requires 200.
func (f *fixture) postTurn(session string, turn map[string]any) turnReply {
	f.t.Helper()
	resp, body := f.do("POST", "/v1/sessions/"+session+"/turns", turn)
	if resp.StatusCode != http.StatusOK {
		f.t.Fatalf("POST turn: %d %s", resp.StatusCode, body)
	}
	var r turnReply
	mustUnmarshal(f.t, body, &r)
	return r
}

// turnResult is what a turn request in the background returned.
type turnResult struct {
	code  int
	reply turnReply
	body  string
	err   error
}

// postTurnAsync dispatches a turn in a goroutine the test waits for
// through the returned channel (and at cleanup).
func (f *fixture) postTurnAsync(ctx context.Context, session string, turn map[string]any) <-chan turnResult {
	out := make(chan turnResult, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	f.t.Cleanup(wg.Wait)
	js, err := json.Marshal(turn)
	if err != nil {
		f.t.Fatal(err)
	}
	go func() {
		defer wg.Done()
		var res turnResult
		defer func() { out <- res }()
		req, err := http.NewRequestWithContext(ctx, "POST", f.url+"/v1/sessions/"+session+"/turns", bytes.NewReader(js))
		if err != nil {
			res.err = err
			return
		}
		req.Header.Set("Content-Type", "application/json")
		if f.token != "" {
			req.Header.Set("Authorization", "Bearer "+f.token)
		}
		resp, err := f.client.Do(req)
		if err != nil {
			res.err = err
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		res.code, res.body, res.err = resp.StatusCode, string(body), err
		if err == nil && resp.StatusCode == http.StatusOK {
			res.err = json.Unmarshal(body, &res.reply)
		}
	}()
	return out
}

// awaitTurn waits for a background turn.
func awaitTurn(t *testing.T, ch <-chan turnResult) turnResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(testTimeout):
		t.Fatal("the turn request did not return")
		return turnResult{}
	}
}

// sseEvent is one server-sent event as a client reads it.
type sseEvent struct {
	ID, Event, Data string
}

// decode unmarshals the event's data.
func (e sseEvent) decode(t *testing.T, v any) {
	t.Helper()
	mustUnmarshal(t, []byte(e.Data), v)
}

// sseClient reads an event stream.
type sseClient struct {
	t      *testing.T
	resp   *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
}

// openSSE opens an event stream with GET (or POST when body is set) and
// requires 200 text/event-stream. lastID, when set, is sent as
// Last-Event-ID. The stream is closed at cleanup.
func (f *fixture) openSSE(method, path string, body any, lastID string) *sseClient {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	var rd io.Reader
	if body != nil {
		js, err := json.Marshal(body)
		if err != nil {
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.url+path, rd)
	if err != nil {
		cancel()
		f.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		cancel()
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		f.t.Fatalf("%s %s: %d %s %s", method, path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	c := &sseClient{t: f.t, resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
	f.t.Cleanup(c.close)
	return c
}

func (c *sseClient) close() {
	c.cancel()
	c.resp.Body.Close()
}

// next returns the next event (comments skipped), or io.EOF when the
// stream ended.
func (c *sseClient) next() (sseEvent, error) {
	var ev sseEvent
	seen := false
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			if err == io.EOF && seen {
				return ev, nil
			}
			return ev, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if seen && ev.Event != "" {
				return ev, nil
			}
			seen = false
		case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "retry:"):
		case strings.HasPrefix(line, "id: "):
			ev.ID, seen = strings.TrimPrefix(line, "id: "), true
		case strings.HasPrefix(line, "event: "):
			ev.Event, seen = strings.TrimPrefix(line, "event: "), true
		case strings.HasPrefix(line, "data: "):
			ev.Data, seen = ev.Data+strings.TrimPrefix(line, "data: "), true
		}
	}
}

// must returns the next event and fails the test at the end of the stream.
func (c *sseClient) must() sseEvent {
	c.t.Helper()
	ev, err := c.next()
	if err != nil {
		c.t.Fatalf("reading the event stream: %v", err)
	}
	return ev
}

// until reads events until one of kind for callID ("" for any call) and
// returns it with the data decoded.
func (c *sseClient) until(kind, callID string) eventData {
	c.t.Helper()
	for {
		ev := c.must()
		if ev.Event != kind {
			continue
		}
		var d eventData
		ev.decode(c.t, &d)
		if callID == "" || d.CallID == callID {
			return d
		}
	}
}

// call builds one tool call of an assistant message.
func call(t *testing.T, id, name string, args any) map[string]any {
	t.Helper()
	js, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(js)}}
}

// turn builds a turn request of provider claude-code with schemas loaded
// at once, so built-in tools run on their first call.
func turn(run, approve string, calls ...map[string]any) map[string]any {
	return map[string]any{
		"run": run, "provider": toolkit.ProviderClaudeCode, "auto_load_schemas": true, "approve": approve,
		"message": map[string]any{"role": "assistant", "content": "", "tool_calls": calls},
	}
}

func mustUnmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
}

// statuses lists the status of each tool message.
func statuses(ms []toolMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Status
	}
	return out
}
