package service

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestOperatorPagePages drives the page in headless Chromium with more
// deferred approvals than one page holds: the page shows the first 50 and
// a "Show more" button, each click adds the next page in the listing's
// order until none is left and the button goes; an approval asked
// afterwards appears from its event, in its place, and an answered one
// leaves, without the page reading the whole list again (every read of
// GET /v1/pending after the first page names a cursor or a session).
func TestOperatorPagePages(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skip("chromium not installed at /usr/bin/chromium: .ci/run installs it")
	}
	var mu sync.Mutex
	var reads []string
	f := newFixture(t, fixtureOpts{token: testToken, observe: func(r *http.Request) {
		if r.URL.Path == "/v1/pending" {
			mu.Lock()
			reads = append(reads, r.URL.RawQuery)
			mu.Unlock()
		}
	}})
	for i, n := range []int{40, 40, 30} {
		f.postTurn(fmt.Sprintf("p%d", i+1), deferredTurn("r", edits(t, fmt.Sprintf("p%de", i+1), n)...))
	}
	var want []string
	for cursor := ""; ; {
		p, _ := f.getPending("?limit=200&cursor=" + cursor)
		for _, c := range p.Confirmations {
			want = append(want, c["session"].(string)+"/"+c["call_id"].(string))
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if len(want) != 110 {
		t.Fatalf("%d approvals wait, want 110", len(want))
	}
	mu.Lock()
	reads = nil
	mu.Unlock()

	ctx, browser := newBrowser(t)
	shown := func() []string {
		t.Helper()
		ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#confirms li.confirm')].map((li) => li.dataset.session + '/' + li.dataset.callId)`))
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	count := func(n int) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelectorAll('#confirms li.confirm').length === %d`, n))
	}
	runSteps(t, ctx, browser, append(loginSteps(f),
		browserStep{"see the first page", count(50)},
		browserStep{"see Show more", chromedp.WaitVisible(chromedp.CSS(`#pending-more`))}))
	if got := shown(); !slices.Equal(got, want[:50]) {
		t.Errorf("the first page shows %v, want %v", got, want[:50])
	}
	runSteps(t, ctx, browser, []browserStep{
		{"show more", chromedp.Click(chromedp.CSS(`#pending-more`))},
		{"see the second page", count(100)},
		{"show the rest", chromedp.Click(chromedp.CSS(`#pending-more`))},
		{"see them all", count(110)},
		{"Show more gone", chromedp.WaitNotVisible(chromedp.CSS(`#pending-more`))},
	})
	if got := shown(); !slices.Equal(got, want) {
		t.Errorf("after two more pages the page shows %v, want %v", got, want)
	}
	saveScreenshot(t, ctx, "operator-page-paged.png")

	f.postTurn("p4", deferredTurn("r", edits(t, "p4e", 2)...))
	item := func(s, id string) string {
		return `#confirms li.confirm[data-session="` + s + `"][data-call-id="` + id + `"]`
	}
	runSteps(t, ctx, browser, []browserStep{
		{"see the new ones", count(112)},
		{"approve one of the second page", chromedp.Click(chromedp.CSS(item("p2", "p2e20") + ` button.approve`))},
		{"it leaves", chromedp.WaitNotPresent(chromedp.CSS(item("p2", "p2e20")))},
		{"see it done", chromedp.WaitVisible(chromedp.CSS(`article.session[data-session="p2"] tr.call[data-call-id="p2e20"][data-status="ok"]`))},
	})
	got := shown()
	if len(got) != 111 || got[109] != "p4/p4e0" || got[110] != "p4/p4e1" || slices.Contains(got, "p2/p2e20") {
		t.Errorf("after a new turn and an answer the page shows %d items ending %v", len(got), got[max(0, len(got)-3):])
	}
	mu.Lock()
	defer mu.Unlock()
	for _, q := range reads {
		if !strings.Contains(q, "cursor=") && !strings.Contains(q, "session=") {
			t.Errorf("the page read the whole list (GET /v1/pending?%s); reads: %q", q, reads)
		}
	}
	if len(reads) < 3 {
		t.Errorf("the page read GET /v1/pending %d times (%q), want the two pages and the new turn's", len(reads), reads)
	}
}
