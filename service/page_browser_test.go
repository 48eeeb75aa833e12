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
// edit_file patch waits with its diff at the page's full width, under the
// model's text of its turn, with the turn's calls listed and the second
// edit and a command queued after it shown as "next" at once; the operator
// approves the first with the keyboard (j, a), then types a reason next to
// Deny for the second edit and denies it, and approves the command; the
// reason reaches the model's tool message, statuses read in plain words,
// live events keep their numbers in view, and the list ends empty.
// Screenshots of the turn pending, the diff, the page after the approval,
// the live events and the empty state go to $TOOLDISPATCH_ARTIFACTS when
// set.
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
	const text = "The notes should say what the <em>question</em> was, and data.csv needs a third column. " +
		"I will edit both files, then list the workspace to check."
	longLine := "The question is <unknown>; it was asked by a computer the size of a planet, and the answer came " +
		"seven and a half million years later, which is why nobody remembers the question any more."
	done := f.postTurnAsync(turnCtx, "browser-s", turnWithText("r1", "ask", text,
		call(t, "w0", "calculate", map[string]any{"expression": "6 * 7"}),
		call(t, "w1", "edit_file", map[string]any{"path": "notes.md",
			"old_string": "The answer is 42.", "new_string": "The answer is 42.\n" + longLine}),
		call(t, "w2", "edit_file", map[string]any{"path": "data.csv", "content": "a,b,c\n1,2,3\n"}),
		call(t, "w3", "run_command", map[string]any{"argv": []string{"ls", "-l", "notes.md"}})))

	const reason = "keep data.csv as it is, add a new file"
	item := func(id string) string {
		return `#confirms li.confirm[data-session="browser-s"][data-call-id="` + id + `"]`
	}
	next := func(id string) string {
		return `#confirms li.next[data-session="browser-s"][data-call-id="` + id + `"]`
	}
	runSteps(t, ctx, browser, []browserStep{
		{"see w1's diff", chromedp.WaitVisible(chromedp.CSS(item("w1") + ` pre.diff span.add`))},
		{"see w1's timing", chromedp.WaitVisible(chromedp.CSS(item("w1") + ` p.timing`))},
		{"see the model's text", chromedp.WaitVisible(chromedp.CSS(item("w1") + ` figure.turn-text blockquote`))},
		{"see w2 next", chromedp.WaitVisible(chromedp.CSS(next("w2")))},
		{"see w3 next with its command", chromedp.WaitVisible(chromedp.CSS(next("w3") + ` pre.command`))},
		{"see w0 checked", chromedp.WaitVisible(chromedp.CSS(item("w1") + ` table.turn-calls tr[data-call-id="w0"][data-status="ready"]`))},
	})
	said, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(item("w1")+` figure.turn-text blockquote`)))
	if err != nil || said != text {
		t.Errorf("w1 shows the model's text %q (%v), want %q", said, err, text)
	}
	command, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(next("w3")+` pre.command`)))
	if err != nil || command != "$ ls -l notes.md" {
		t.Errorf("w3 is previewed as %q (%v)", command, err)
	}
	// The diff has the page's width: not a column of a third of it.
	share, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(() => {
		const d = document.querySelector('li.confirm[data-call-id="w1"] pre.diff');
		return d.getBoundingClientRect().width / document.querySelector('main').clientWidth; })()`))
	if err != nil || share < 0.9 {
		t.Errorf("w1's diff takes %.2f of the page's width (%v), want nearly all of it", share, err)
	}
	added, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(item("w1")+` pre.diff span.add`)))
	if err != nil {
		t.Fatal(err)
	}
	timing, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(item("w1")+` p.timing`)))
	if err != nil {
		t.Fatal(err)
	}
	if added != "+"+longLine {
		t.Errorf("w1's diff adds %q, want the new line as text", added)
	}
	if !strings.Contains(timing, "times out") {
		t.Errorf("w1's timing says %q, want when it times out", timing)
	}
	saveScreenshot(t, ctx, "operator-page-turn-pending.png")
	saveElementScreenshot(t, ctx, item("w1")+` pre.diff`, "operator-page-diff.png")

	runSteps(t, ctx, browser, []browserStep{
		{"focus the first item (j)", chromedp.KeyEvent("j")},
		{"approve it (a)", chromedp.KeyEvent("a")},
		{"w1 gone", chromedp.WaitNotPresent(chromedp.CSS(item("w1")))},
		{"see w2's diff", chromedp.WaitVisible(chromedp.CSS(item("w2") + ` pre.diff span.del`))},
		{"w2 no longer next", chromedp.WaitNotPresent(chromedp.CSS(next("w2")))},
		{"w3 still next", chromedp.WaitVisible(chromedp.CSS(next("w3")))},
		{"see w1 approved in w2's turn", chromedp.WaitVisible(chromedp.CSS(item("w2") + ` table.turn-calls tr[data-call-id="w1"][data-status="approved"]`))},
		{"type the reason", chromedp.SendKeys(chromedp.CSS(item("w2")+` input.deny-reason`), reason)},
	})
	saveScreenshot(t, ctx, "operator-page-after-approval.png")
	runSteps(t, ctx, browser, []browserStep{
		{"deny w2", chromedp.Click(chromedp.CSS(item("w2") + ` button.deny`))},
		{"w2 gone", chromedp.WaitNotPresent(chromedp.CSS(item("w2")))},
		{"approve w3", chromedp.Click(chromedp.CSS(item("w3") + ` button.approve`))},
		{"w3 gone", chromedp.WaitNotPresent(chromedp.CSS(item("w3")))},
		{"see w1 ok", chromedp.WaitVisible(chromedp.CSS(`article.session[data-session="browser-s"] tr.call[data-call-id="w1"][data-status="ok"]`))},
		{"see w2 skipped", chromedp.WaitVisible(chromedp.CSS(`article.session[data-session="browser-s"] tr.call[data-call-id="w2"][data-status="skipped"]`))},
		{"see the glance", chromedp.WaitVisible(chromedp.CSS(`article.session[data-session="browser-s"] p.glance span.count[data-status="skipped"]`))},
		{"nothing pending", chromedp.WaitVisible(chromedp.CSS(`#nothing-pending`))},
		{"open the live events", chromedp.Click(chromedp.CSS(`article.session[data-session="browser-s"] details.live summary`))},
		{"see the events", chromedp.WaitVisible(chromedp.CSS(`article.session[data-session="browser-s"] ul.events span.seq`))},
	})
	saveScreenshot(t, ctx, "operator-page-empty.png")
	saveElementScreenshot(t, ctx, `article.session[data-session="browser-s"]`, "operator-page-session-events.png")
	words, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`article.session[data-session="browser-s"] tr.call[data-call-id="w1"] td.status`)))
	if err != nil || words != "done" {
		t.Errorf("w1's status reads %q (%v), want plain words", words, err)
	}
	// Every live event's number is in view: none starts left of its list,
	// and the numbers are the turn's and the event's.
	seen, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
		const ul = document.querySelector('article.session[data-session="browser-s"] ul.events');
		const left = ul.getBoundingClientRect().left;
		return [...ul.querySelectorAll('span.seq')].map((s) => s.getBoundingClientRect().left >= left ? s.textContent : 'clipped ' + s.textContent); })()`))
	if err != nil || len(seen) < 10 {
		t.Fatalf("live events: %v (%v)", seen, err)
	}
	for _, n := range seen {
		if !strings.HasPrefix(n, "1.") {
			t.Errorf("a live event's number reads %q, want 1.<n>, in view", n)
		}
	}

	res := awaitTurn(t, done)
	if res.code != http.StatusOK || strings.Join(statuses(res.reply.Messages), ",") != "ok,ok,skipped,ok" {
		t.Fatalf("the turn: %d %s", res.code, res.body)
	}
	if got := res.reply.Messages[2].Content; !strings.Contains(got, reason) {
		t.Errorf("the denied call's tool message %q lacks the reason typed on the page", got)
	}
	if b, err := os.ReadFile(filepath.Join(f.dir, "notes.md")); err != nil || !strings.Contains(string(b), longLine) {
		t.Errorf("notes.md = %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(f.dir, "data.csv")); err != nil || string(b) != workspaceFiles["data.csv"] {
		t.Errorf("data.csv = %q, %v: the denied edit ran", b, err)
	}
}

// saveElementScreenshot writes a screenshot of the element sel to
// $TOOLDISPATCH_ARTIFACTS/name; without that variable it writes nothing.
func saveElementScreenshot(t *testing.T, ctx context.Context, sel, name string) {
	t.Helper()
	dir := os.Getenv("TOOLDISPATCH_ARTIFACTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("screenshot of %s: %v", sel, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of %s: %s (%d bytes)", sel, path, len(png))
}
