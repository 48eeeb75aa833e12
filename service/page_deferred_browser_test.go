package service

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tooldispatch/tooldispatch/actors"
)

// TestOperatorPageDeferredApproval drives the page in headless Chromium
// with a deferred approval: the turn returns at once, the page lists the
// edit with its diff and "waits until answered" (no timeout), the
// operator approves it, the item leaves the list and the call's row ends
// ok. The pending item's screenshot goes to $TOOLDISPATCH_ARTIFACTS when
// set.
func TestOperatorPageDeferredApproval(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skip("chromium not installed at /usr/bin/chromium: .ci/run installs it")
	}
	f := newFixture(t, fixtureOpts{token: testToken, approve: actors.ApproveAsk})
	ctx, browser := newBrowser(t)
	runSteps(t, ctx, browser, append(loginSteps(f),
		browserStep{"nothing pending", chromedp.WaitVisible(chromedp.CSS(`#nothing-pending`))}))
	const reason = "The notes are out of date: the answer is 43 now. I will correct them."
	body := turn("r1", "ask", call(t, "d0", "calculate", map[string]any{"expression": "6 * 7 + 1"}),
		call(t, "d1", "edit_file", map[string]any{"path": "notes.md",
			"old_string": "The answer is 42.", "new_string": "The answer is 43."}))
	body["message"].(map[string]any)["content"] = reason
	body["confirm"] = "defer"
	if got := statuses(f.postTurn("deferred-s", body).Messages); strings.Join(got, ",") != "ok,awaiting_approval" {
		t.Fatalf("the deferred turn: %v", got)
	}
	item := `#confirms li.confirm[data-session="deferred-s"][data-call-id="d1"]`
	runSteps(t, ctx, browser, []browserStep{
		{"see d1's diff", chromedp.WaitVisible(chromedp.CSS(item + ` pre.diff span.add`))},
		{"see d1's timing", chromedp.WaitVisible(chromedp.CSS(item + ` p.timing`))},
	})
	timing, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(item+` p.timing`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(timing, "waits until answered") || strings.Contains(timing, "times out") {
		t.Errorf("a deferred approval's timing says %q, want that it waits until answered", timing)
	}
	// Who asked and why, read back from the committed turn: the model's
	// text, the badge, and the turn's calls with their statuses.
	shown, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(item)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{reason, "deferred", "d0", "calculate", statusText("ok"), statusText("awaiting_approval")} {
		if !strings.Contains(shown, want) {
			t.Errorf("the deferred item does not show %q:\n%s", want, shown)
		}
	}
	saveScreenshot(t, ctx, "operator-page-deferred.png")
	runSteps(t, ctx, browser, []browserStep{
		{"approve d1", chromedp.Click(chromedp.CSS(item + ` button.approve`))},
		{"d1 gone", chromedp.WaitNotPresent(chromedp.CSS(item))},
		{"see d1 ok", chromedp.WaitVisible(chromedp.CSS(`article.session[data-session="deferred-s"] tr.call[data-call-id="d1"][data-status="ok"]`))},
		{"nothing pending", chromedp.WaitVisible(chromedp.CSS(`#nothing-pending`))},
	})
	if b, err := os.ReadFile(filepath.Join(f.dir, "notes.md")); err != nil || !strings.Contains(string(b), "The answer is 43.") {
		t.Errorf("notes.md = %q, %v", b, err)
	}
}
