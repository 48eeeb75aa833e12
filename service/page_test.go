package service

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// askBox is an ask_user tool whose questions are answered through Replies.
type askBox struct {
	mu       sync.Mutex
	slots    map[string]chan string // guarded by mu: by session and call id
	answered map[string]bool        // guarded by mu
}

func (a *askBox) slot(session, callID string) chan string {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := session + "\x00" + callID
	if a.slots[k] == nil {
		a.slots[k] = make(chan string, 1)
	}
	return a.slots[k]
}

func (a *askBox) tool() toolkit.Tool {
	return toolkit.Tool{
		Name: "ask_user", Description: "Ask the user a question and wait for the answer.",
		Schema:   []byte(`{"type":"object","properties":{"question":{"type":"string"}},"required":["question"],"additionalProperties":false}`),
		ReadOnly: true,
		Handler: func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
			select {
			case ans := <-a.slot(c.Session, c.ID):
				return toolkit.Result{Content: ans}, nil
			case <-ctx.Done():
				return toolkit.Result{}, ctx.Err()
			}
		},
	}
}

// Answer implements Replies.
func (a *askBox) Answer(_ context.Context, session, callID, text string) error {
	ch := a.slot(session, callID)
	a.mu.Lock()
	defer a.mu.Unlock()
	k := session + "\x00" + callID
	if a.answered[k] {
		return actors.ErrAlreadyAnswered
	}
	a.answered[k] = true
	ch <- text
	return nil
}

// ClientResult implements Replies.
func (a *askBox) ClientResult(context.Context, string, string, string, bool) error {
	return actors.ErrNoPending
}

// chromiumPath is where the browser test looks for Chromium.
const chromiumPath = "/usr/bin/chromium"

// browserTimeout bounds the browser test's steps (each waits for the page).
const browserTimeout = 45 * time.Second

// TestOperatorPageRender: the page's first state is rendered on the
// server: sessions with their calls, and what waits for an answer, with the
// ids page.js and tests rely on. Text from sessions is escaped.
func TestOperatorPageRender(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.postTurn(url.PathEscape("<b>bold</b>"), turn("r1", "all", call(t, "c1", "calculate", map[string]any{"expression": "1 + 2"})))
	events := f.openSSE("GET", "/v1/sessions/page-s/events", nil, "")
	done := f.postTurnAsync(t.Context(), "page-s", turn("r1", "ask",
		call(t, "e1", "edit_file", map[string]any{"path": "p.txt", "content": "p"})))
	asked := events.until("tool_confirm", "e1")

	resp, body := f.do("GET", "/", nil)
	page := string(body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`<li class="confirm" data-session="page-s" data-call-id="e1" data-args-hash="` + asked.ArgsHash + `"`,
		`<button type="button" class="approve">Approve</button>`,
		`<button type="button" class="deny">Deny</button>`,
		`<article class="session" data-session="page-s">`,
		`data-call-id="e1" data-status="confirm"`,
		`data-call-id="c1" data-status="ok"`,
		`&lt;b&gt;bold&lt;/b&gt;`,
		`last turn 1: <span class="count" data-status="confirm">1 waits for your answer</span>`,
		`last turn 1: <span class="count" data-status="ok">1 done</span>`,
		`<script src="static/page.js" defer></script>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(page, "<b>bold</b>") {
		t.Error("a session id reached the page unescaped")
	}
	for name, ct := range staticTypes {
		resp, body := f.do("GET", "/static/"+name, nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != ct || len(body) == 0 {
			t.Errorf("GET /static/%s: %d %q", name, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	if resp, _ := f.do("GET", "/static/../server.go", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /static/../server.go: %d", resp.StatusCode)
	}

	if resp, body := f.do("POST", "/v1/sessions/page-s/confirm/e1", map[string]any{"approve": false, "args_hash": asked.ArgsHash}); resp.StatusCode != http.StatusOK {
		t.Fatalf("deny: %d %s", resp.StatusCode, body)
	}
	awaitTurn(t, done)
}

// TestOperatorPageApprove drives the page in headless Chromium: a turn
// asks for a confirmation, the page shows it live, the operator approves
// it and answers the turn's ask_user question, and the page shows the
// calls' results.
func TestOperatorPageApprove(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skip("chromium not installed at /usr/bin/chromium: .ci/run installs it")
	}
	ask := &askBox{slots: map[string]chan string{}, answered: map[string]bool{}}
	f := newFixture(t, fixtureOpts{token: testToken, replies: ask, tools: []toolkit.Tool{ask.tool()}})
	f.postTurn("earlier-session", turn("r1", "all",
		call(t, "c1", "calculate", map[string]any{"expression": "6 * 7"}),
		call(t, "c2", "read_files", map[string]any{"paths": []string{"notes.md"}})))

	ctx, browser := newBrowser(t)
	// Sign in with the token once; the page continues on the cookie.
	runSteps(t, ctx, browser, append(loginSteps(f), browserStep{"see the earlier session",
		chromedp.WaitVisible(chromedp.CSS(`article.session[data-session="earlier-session"] tr.call[data-call-id="c1"][data-status="ok"]`))}))
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || strings.Contains(loc, "token") {
		t.Errorf("the page's address is %q (%v): the token must not stay in it", loc, err)
	}

	turnCtx, cancelTurn := context.WithTimeout(context.Background(), testTimeout)
	defer cancelTurn()
	done := f.postTurnAsync(turnCtx, "browser-s", turn("r1", "ask",
		call(t, "w1", "edit_file", map[string]any{"path": "from-page.txt", "content": "approved on the page\n"}),
		call(t, "w2", "calculate", map[string]any{"expression": "2 ** 8"}),
		call(t, "w3", "ask_user", map[string]any{"question": "Which colour?"})))

	approve := chromedp.CSS(`#confirms li.confirm[data-session="browser-s"][data-call-id="w1"] button.approve`)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(approve)); err != nil {
		t.Fatalf("waiting for the confirmation: %v", err)
	}
	question := `#questions li.question[data-session="browser-s"][data-call-id="w3"]`
	runSteps(t, ctx, browser, []browserStep{
		{"approve", chromedp.Click(approve)},
		{"confirmation gone", chromedp.WaitNotPresent(chromedp.CSS(`#confirms li.confirm[data-call-id="w1"]`))},
		{"see the question", chromedp.WaitVisible(chromedp.CSS(question + ` textarea.answer-text`))},
		{"type the answer", chromedp.SendKeys(chromedp.CSS(question+` textarea.answer-text`), "teal")},
		{"send the answer", chromedp.Click(chromedp.CSS(question + ` button.answer`))},
		{"see w1 ok", chromedp.WaitVisible(chromedp.CSS(`article.session[data-session="browser-s"] tr.call[data-call-id="w1"][data-status="ok"]`))},
		{"see w2 ok", chromedp.WaitVisible(chromedp.CSS(`article.session[data-session="browser-s"] tr.call[data-call-id="w2"][data-status="ok"]`))},
		{"see w3 ok", chromedp.WaitVisible(chromedp.CSS(`article.session[data-session="browser-s"] tr.call[data-call-id="w3"][data-status="ok"]`))},
		{"question gone", chromedp.WaitNotPresent(chromedp.CSS(question))},
	})

	res := awaitTurn(t, done)
	if res.code != http.StatusOK || strings.Join(statuses(res.reply.Messages), ",") != "ok,ok,ok" {
		t.Fatalf("the turn: %d %s", res.code, res.body)
	}
	if got := res.reply.Messages[2].Content; got != "teal" {
		t.Errorf("ask_user returned %q, want the answer typed on the page", got)
	}
	if b, err := os.ReadFile(filepath.Join(f.dir, "from-page.txt")); err != nil || string(b) != "approved on the page\n" {
		t.Errorf("from-page.txt = %q, %v", b, err)
	}
}

// newBrowser starts headless Chromium for one test; ctx bounds the test's
// steps, browser outlives that bound (for diagnostics).
func newBrowser(t *testing.T) (ctx, browser context.Context) {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	if browserSPKI != "" {
		// The fixture serves HTTPS: Chromium trusts its certificate's
		// key, and nothing else it would not trust anyway.
		opts = append(opts, chromedp.Flag("ignore-certificate-errors-spki-list", browserSPKI))
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	ctx, cancel := context.WithTimeout(browser, browserTimeout)
	t.Cleanup(cancel)
	return ctx, browser
}

// saveScreenshot writes a screenshot of the whole page to
// $TOOLDISPATCH_ARTIFACTS/name; without that variable it writes nothing.
func saveScreenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("TOOLDISPATCH_ARTIFACTS")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the operator page: %s (%d bytes)", path, len(png))
}

// runSteps runs browser steps in order and fails with the page's state at
// the first that fails.
func runSteps(t *testing.T, ctx, browser context.Context, steps []browserStep) {
	t.Helper()
	for _, st := range steps {
		if err := chromedp.Do(ctx, st.do); err != nil {
			dctx, dcancel := context.WithTimeout(browser, 5*time.Second)
			html, _ := chromedp.Run(dctx, chromedp.OuterHTML(chromedp.CSS("main")))
			dcancel()
			t.Fatalf("%s: %v\n%s", st.name, err, html)
		}
	}
}

type browserStep struct {
	name string
	do   chromedp.Action[chromedp.Void]
}
