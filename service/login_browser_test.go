package service

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// loginSteps opens a token server's page in the browser, which lands on the
// login page, and signs in with the token through the form.
func loginSteps(f *fixture) []browserStep {
	return []browserStep{
		{"open the page", chromedp.Navigate(f.url + "/")},
		{"see the login form", chromedp.WaitVisible(chromedp.CSS(`form.login-form input[name="token"]`))},
		{"type the token", chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), testToken)},
		{"sign in", chromedp.Submit(chromedp.CSS(`form.login-form`))},
		{"live", chromedp.WaitVisible(chromedp.CSS(`#conn[data-state="live"]`))},
	}
}

// TestOperatorPageLogin drives the login in headless Chromium: opening a
// token server's page shows the login form; a wrong token is refused on
// the page; the right one leads to the live page, with the token in no
// address and only an HttpOnly, SameSite=Strict cookie that the page's
// script cannot read, Secure when the page is served over TLS. A
// screenshot of the login page goes to $TOOLDISPATCH_ARTIFACTS when set.
func TestOperatorPageLogin(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skip("chromium not installed at /usr/bin/chromium: .ci/run installs it")
	}
	f := newFixture(t, fixtureOpts{token: testToken})
	f.postTurn("login-session", turn("r1", "all", call(t, "c1", "calculate", map[string]any{"expression": "6 * 7"})))
	ctx, browser := newBrowser(t)

	steps := loginSteps(f)
	runSteps(t, ctx, browser, steps[:2])
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || !strings.HasSuffix(loc, "/login") {
		t.Errorf("opening the page led to %q (%v), want the login page", loc, err)
	}
	saveScreenshot(t, ctx, "operator-login.png")

	runSteps(t, ctx, browser, []browserStep{
		{"type a wrong token", chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), "not-the-token")},
		{"sign in", chromedp.Submit(chromedp.CSS(`form.login-form`))},
		{"see the error", chromedp.WaitVisible(chromedp.CSS(`p.login-error`))},
	})
	msg, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`p.login-error`)))
	if err != nil || msg != wrongToken {
		t.Errorf("the login page says %q (%v), want %q", msg, err, wrongToken)
	}
	saveScreenshot(t, ctx, "operator-login-wrong-token.png")

	runSteps(t, ctx, browser, steps[2:])
	runSteps(t, ctx, browser, []browserStep{
		{"see the session", chromedp.WaitVisible(chromedp.CSS(`article.session[data-session="login-session"] tr.call[data-call-id="c1"][data-status="ok"]`))},
	})
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || strings.Contains(loc, testToken) || strings.Contains(loc, "login") {
		t.Errorf("after the login the address is %q (%v): want the page, without the token", loc, err)
	}
	if seen, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.cookie")); err != nil || seen != "" {
		t.Errorf("the page's script reads the cookie %q (%v): it must be HttpOnly", seen, err)
	}
	cookies, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) ([]*network.Cookie, error) {
		res, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{})
		return res.Cookies, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cookies) != 1 || cookies[0].Name != tokenCookie || !cookies[0].HTTPOnly || cookies[0].SameSite != network.CookieSameSiteStrict ||
		cookies[0].Secure != overTLS || strings.Contains(cookies[0].Value, testToken) {
		for _, c := range cookies {
			t.Logf("cookie %s HttpOnly=%v SameSite=%s Secure=%v", c.Name, c.HTTPOnly, c.SameSite, c.Secure)
		}
		t.Errorf("the browser holds %d cookies; want the page's, HttpOnly and SameSite=Strict, Secure over TLS (TLS: %v), without the token", len(cookies), overTLS)
	}
	// No address in the tab's history carries the token.
	hist, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) (*page.GetNavigationHistoryResult, error) {
		res, err := cdp.Call(ctx, tg, page.GetNavigationHistory, cdp.Empty{})
		return &res, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Entries) == 0 {
		t.Fatal("the tab has no history")
	}
	for _, e := range hist.Entries {
		if strings.Contains(e.URL, testToken) || strings.Contains(e.URL, "token=") {
			t.Errorf("the history holds %s", e.URL)
		}
	}
}
