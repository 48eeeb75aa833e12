package service

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestOperatorPageDiffApproveDeny drives the page in headless Chromium: an
// edit_file patch waits with its diff; the operator approves it with the
// keyboard (j, a), then types a reason next to Deny for the second edit and
// denies it; the reason reaches the model's tool message and the list ends
// empty. Screenshots of the pending diff, the page after the approval and
// the empty state go to $TOOLDISPATCH_ARTIFACTS when set.
func TestOperatorPageDiffApproveDeny(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skip("chromium not installed at /usr/bin/chromium: .ci/run installs it")
	}
	f := newFixture(t, fixtureOpts{token: testToken})
	f.postTurn("earlier-session", turn("r1", "all",
		call(t, "c1", "calculate", map[string]any{"expression": "6 * 7"}),
		call(t, "c2", "calculate", map[string]any{"expression": "1 / 0"}),
		call(t, "c3", "read_files", map[string]any{"paths": []string{"notes.md"}})))

	ctx, browser := newBrowser(t)
	runSteps(t, ctx, browser, append(loginSteps(f),
		browserStep{"nothing pending", chromedp.WaitVisible(chromedp.CSS(`#nothing-pending`))}))

	turnCtx, cancelTurn := context.WithTimeout(context.Background(), testTimeout)
	defer cancelTurn()
	done := f.postTurnAsync(turnCtx, "browser-s", turn("r1", "ask",
		call(t, "w1", "edit_file", map[string]any{"path": "notes.md",
			"old_string": "The answer is 42.", "new_string": "The answer is 42.\nThe question is <unknown>."}),
		call(t, "w2", "edit_file", map[string]any{"path": "data.csv", "content": "a,b,c\n1,2,3\n"})))

	const reason = "keep data.csv as it is, add a new file"
	item := func(id string) string {
		return `#confirms li.confirm[data-session="browser-s"][data-call-id="` + id + `"]`
	}
	runSteps(t, ctx, browser, []browserStep{
		{"see w1's diff", chromedp.WaitVisible(chromedp.CSS(item("w1") + ` pre.diff span.add`))},
		{"see w1's timing", chromedp.WaitVisible(chromedp.CSS(item("w1") + ` p.timing`))},
	})
	added, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(item("w1")+` pre.diff span.add`)))
	if err != nil {
		t.Fatal(err)
	}
	timing, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(item("w1")+` p.timing`)))
	if err != nil {
		t.Fatal(err)
	}
	if added != "+The question is <unknown>." {
		t.Errorf("w1's diff adds %q, want the new line as text", added)
	}
	if !strings.Contains(timing, "times out") {
		t.Errorf("w1's timing says %q, want when it times out", timing)
	}
	saveScreenshot(t, ctx, "operator-page-pending-diff.png")

	runSteps(t, ctx, browser, []browserStep{
		{"focus the first item (j)", chromedp.KeyEvent("j")},
		{"approve it (a)", chromedp.KeyEvent("a")},
		{"w1 gone", chromedp.WaitNotPresent(chromedp.CSS(item("w1")))},
		{"see w2's diff", chromedp.WaitVisible(chromedp.CSS(item("w2") + ` pre.diff span.del`))},
		{"type the reason", chromedp.SendKeys(chromedp.CSS(item("w2")+` input.deny-reason`), reason)},
	})
	saveScreenshot(t, ctx, "operator-page-after-approval.png")
	runSteps(t, ctx, browser, []browserStep{
		{"deny w2", chromedp.Click(chromedp.CSS(item("w2") + ` button.deny`))},
		{"w2 gone", chromedp.WaitNotPresent(chromedp.CSS(item("w2")))},
		{"see w1 ok", chromedp.WaitVisible(chromedp.CSS(`article.session[data-session="browser-s"] tr.call[data-call-id="w1"][data-status="ok"]`))},
		{"see w2 skipped", chromedp.WaitVisible(chromedp.CSS(`article.session[data-session="browser-s"] tr.call[data-call-id="w2"][data-status="skipped"]`))},
		{"see the glance", chromedp.WaitVisible(chromedp.CSS(`article.session[data-session="browser-s"] p.glance span.count[data-status="skipped"]`))},
		{"nothing pending", chromedp.WaitVisible(chromedp.CSS(`#nothing-pending`))},
	})
	saveScreenshot(t, ctx, "operator-page-empty.png")

	res := awaitTurn(t, done)
	if res.code != http.StatusOK || strings.Join(statuses(res.reply.Messages), ",") != "ok,skipped" {
		t.Fatalf("the turn: %d %s", res.code, res.body)
	}
	if got := res.reply.Messages[1].Content; !strings.Contains(got, reason) {
		t.Errorf("the denied call's tool message %q lacks the reason typed on the page", got)
	}
	if b, err := os.ReadFile(filepath.Join(f.dir, "notes.md")); err != nil || !strings.Contains(string(b), "The question is <unknown>.") {
		t.Errorf("notes.md = %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(f.dir, "data.csv")); err != nil || string(b) != workspaceFiles["data.csv"] {
		t.Errorf("data.csv = %q, %v: the denied edit ran", b, err)
	}
}
