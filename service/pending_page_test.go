package service

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/seam"
)

// pendingPage is the body of GET /v1/pending as these tests read it.
type pendingPageBody struct {
	Confirmations []map[string]any `json:"confirmations"`
	Questions     []map[string]any `json:"questions"`
	Turns         []map[string]any `json:"turns"`
	Limit         int              `json:"limit"`
	NextCursor    string           `json:"next_cursor"`
}

// getPending reads one page, requiring 200.
func (f *fixture) getPending(query string) (pendingPageBody, int) {
	f.t.Helper()
	resp, body := f.do("GET", "/v1/pending"+query, nil)
	if resp.StatusCode != http.StatusOK {
		f.t.Fatalf("GET /v1/pending%s: %d %s", query, resp.StatusCode, body)
	}
	var p pendingPageBody
	mustUnmarshal(f.t, body, &p)
	return p, len(body)
}

// deferredTurn is a turn whose calls that need approval are deferred.
func deferredTurn(run string, calls ...map[string]any) map[string]any {
	body := turn(run, "ask", calls...)
	body["confirm"] = "defer"
	return body
}

// edits are n edit_file calls creating files named prefix0.txt, ….
func edits(t *testing.T, prefix string, n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		id := fmt.Sprintf("%s%d", prefix, i)
		out[i] = call(t, id, "edit_file", map[string]any{"path": id + ".txt", "content": "line of " + id + "\n"})
	}
	return out
}

// TestPendingOfABigDeferredTurn: a turn of 64 deferred edits among 1 000
// other calls lists each edit as its own call — its arguments as shown,
// args_hash, diff, question and the turn it belongs to — not the turn: a
// page of 50 holds 50 items in well under 100 KiB, the next page the other
// 14, and the turn comes once, bounded, when asked for (include=turn).
func TestPendingOfABigDeferredTurn(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	const deferred, others = 64, 1000
	var calls []map[string]any
	ed := edits(t, "e", deferred)
	for i := range deferred + others {
		if i%16 == 0 && len(ed) > 0 {
			calls, ed = append(calls, ed[0]), ed[1:]
			continue
		}
		calls = append(calls, call(t, fmt.Sprintf("c%d", i), "calculate", map[string]any{"expression": fmt.Sprintf("%d + 1", i)}))
	}
	body := deferredTurn("r", calls...)
	body["message"].(map[string]any)["content"] = strings.Repeat("I will change these files. ", 200)
	body["turn_id"] = "big-turn"
	r := f.postTurn("big-s", body)
	if n := strings.Count(strings.Join(statuses(r.Messages), ","), "awaiting_approval"); n != deferred {
		t.Fatalf("%d calls awaiting approval, want %d", n, deferred)
	}

	page, size := f.getPending("?limit=50")
	t.Logf("a page of 50 of a turn of %d calls: %d bytes", deferred+others, size)
	if len(page.Confirmations) != 50 || size > 100<<10 || page.NextCursor == "" {
		t.Fatalf("a page of limit 50: %d items in %d bytes (next %q), want 50 in at most 100 KiB and a next page",
			len(page.Confirmations), size, page.NextCursor)
	}
	for i, p := range page.Confirmations {
		for _, k := range []string{"calls", "turn_text", "next", "upcoming"} {
			if _, ok := p[k]; ok {
				t.Fatalf("item %d carries its turn's %q: %v", i, k, p)
			}
		}
		id, _ := p["call_id"].(string)
		if !strings.HasPrefix(id, "e") || p["tool"] != "edit_file" || p["turn"] != 1.0 || p["turn_id"] != "big-turn" ||
			!strings.Contains(p["arguments"].(string), id+".txt") || len(p["args_hash"].(string)) != 64 ||
			!strings.Contains(p["diff"].(string), "+line of "+id) || p["deferred"] != true || p["question"] == "" {
			t.Fatalf("item %d = %v, want its own call with its arguments, hash, diff and turn", i, p)
		}
	}
	rest, _ := f.getPending("?limit=50&cursor=" + page.NextCursor)
	if len(rest.Confirmations) != deferred-50 || rest.NextCursor != "" {
		t.Errorf("the second page: %d items (next %q), want %d and the end", len(rest.Confirmations), rest.NextCursor, deferred-50)
	}
	withTurn, size := f.getPending("?limit=50&include=turn")
	if len(withTurn.Turns) != 1 {
		t.Fatalf("include=turn gave %d turns, want the one", len(withTurn.Turns))
	}
	tr := withTurn.Turns[0]
	calls2 := asList(tr["calls"])
	if tr["turn_id"] != "big-turn" || len(calls2) != maxTurnCalls || tr["calls_omitted"] != float64(deferred+others-maxTurnCalls) ||
		len(tr["text"].(string)) > maxShownTurnText+8 {
		t.Errorf("the turn: id %v, %d calls, %v omitted, text of %d bytes; want %d calls and the rest counted, the text cut",
			tr["turn_id"], len(calls2), tr["calls_omitted"], len(tr["text"].(string)), maxTurnCalls)
	}
	t.Logf("with its turn: %d bytes", size)
}

// TestPendingPages: GET /v1/pending gives a page of at most limit items
// and a cursor to the next; read to the end, the pages give every item
// once in the order they were asked, whatever is answered or asked
// between them; the filters (session, run, tool, older_than) keep what
// they name, and a cursor goes on with the filters it was made for.
func TestPendingPages(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.postTurn("s1", deferredTurn("r1", edits(t, "a", 10)...))
	between := time.Now().UTC()
	removes := make([]map[string]any, 4)
	for i := range removes {
		removes[i] = call(t, fmt.Sprintf("rm%d", i), "remove_file", map[string]any{"path": "notes.md"})
	}
	f.postTurn("s2", deferredTurn("r2", append(edits(t, "b", 6), removes...)...))
	f.postTurn("s3", deferredTurn("r1", edits(t, "c", 5)...))

	deny := func(session, callID string) {
		t.Helper()
		views, _ := f.getPending("?session=" + session + "&call_id=" + callID)
		if len(views.Confirmations) != 1 {
			t.Fatalf("the item %s/%s: %v", session, callID, views.Confirmations)
		}
		resp, b := f.do("POST", "/v1/sessions/"+session+"/confirm/"+callID,
			map[string]any{"approve": false, "args_hash": views.Confirmations[0]["args_hash"]})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("denying %s/%s: %d %s", session, callID, resp.StatusCode, b)
		}
	}
	seen := map[string]int{}
	var order []string
	cursor := ""
	for page := 0; ; page++ {
		q := "?limit=7"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		p, _ := f.getPending(q)
		if len(p.Confirmations) > 7 || p.Limit != 7 {
			t.Fatalf("page %d of limit 7 has %d items (limit %d)", page, len(p.Confirmations), p.Limit)
		}
		for _, c := range p.Confirmations {
			k := c["session"].(string) + "/" + c["call_id"].(string)
			seen[k]++
			order = append(order, k)
		}
		if page == 0 {
			deny("s3", "c4") // not given yet: never given
			deny("s1", "a0") // given already
			f.postTurn("s4", deferredTurn("r1", edits(t, "d", 2)...))
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	var want []string
	for _, s := range []struct {
		session string
		ids     []string
	}{
		{"s1", []string{"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9"}},
		{"s2", []string{"b0", "b1", "b2", "b3", "b4", "b5", "rm0", "rm1", "rm2", "rm3"}},
		{"s3", []string{"c0", "c1", "c2", "c3"}},
		{"s4", []string{"d0", "d1"}},
	} {
		for _, id := range s.ids {
			want = append(want, s.session+"/"+id)
		}
	}
	if !slices.Equal(order, want) {
		t.Errorf("the pages gave, in order:\n%v\nwant\n%v", order, want)
	}

	for _, tc := range []struct {
		query string
		n     int
	}{
		{"?session=s2", 10},
		{"?session=s2&tool=remove_file", 4},
		{"?tool=remove_file", 4},
		{"?run=r1", 9 + 4 + 2},
		{"?run=r1&session=s3", 4},
		{"?older_than=" + url.QueryEscape(between.Format(time.RFC3339Nano)), 9},
		{"?older_than=1h", 0},
		{"?session=nobody", 0},
	} {
		got, _ := f.getPending(tc.query)
		if len(got.Confirmations) != tc.n {
			t.Errorf("GET /v1/pending%s: %d items, want %d", tc.query, len(got.Confirmations), tc.n)
		}
	}
	// A filtered listing read a page at a time.
	var s2 []string
	for cursor := ""; ; {
		p, _ := f.getPending("?session=s2&limit=3&cursor=" + cursor)
		for _, c := range p.Confirmations {
			s2 = append(s2, c["call_id"].(string))
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if got := strings.Join(s2, " "); got != "b0 b1 b2 b3 b4 b5 rm0 rm1 rm2 rm3" {
		t.Errorf("s2 a page of 3 at a time: %s", got)
	}
	withTurns, _ := f.getPending("?limit=20&include=turn")
	var turns []string
	for _, tr := range withTurns.Turns {
		turns = append(turns, fmt.Sprintf("%v/%v:%d", tr["session"], tr["turn"], len(asList(tr["calls"]))))
	}
	if got := strings.Join(turns, " "); got != "s1/1:10 s2/1:10 s3/1:5" {
		t.Errorf("include=turn on the first 20 items gave the turns %s, want each once", got)
	}
}

// TestPendingQueryAttacks tries GET /v1/pending with what an attacker or a
// careless client would send: unknown or repeated parameters, limits that
// are no number, too small or huge, filters with odd values, cursors that
// are garbage, too long, made for other filters or forged to point into
// another session. Every one is a 400 naming the parameter, or a page
// within its bounds listing only what the filters name.
func TestPendingQueryAttacks(t *testing.T) {
	f := newFixture(t, fixtureOpts{token: testToken})
	f.postTurn("victim", deferredTurn("r", edits(t, "v", 3)...))
	f.postTurn("mine", deferredTurn("r", edits(t, "m", 3)...))
	first, _ := f.getPending("?session=mine&limit=1")
	forged, _ := json.Marshal(map[string]any{"v": 1, "a": 0, "s": "victim", "c": "v0", "f": filtersID(url.Values{"session": {"mine"}})})
	for _, tc := range []struct {
		name, query, want string
	}{
		{"unknown parameter", "?sesion=mine", `unknown parameter "sesion"`},
		{"repeated parameter", "?session=mine&session=victim", `"session" is given 2 times`},
		{"limit zero", "?limit=0", "limit must be"},
		{"negative limit", "?limit=-5", "limit must be"},
		{"limit not a number", "?limit=1e9", "limit must be"},
		{"limit overflowing", "?limit=99999999999999999999999", "limit must be"},
		{"older_than negative", "?older_than=-5m", "positive duration"},
		{"older_than garbage", "?older_than=yesterday", "older_than must be"},
		{"include unknown", "?include=everything", `include must be "turn"`},
		{"session too long", "?session=" + strings.Repeat("s", maxFilterLen+1), "session is longer than"},
		{"cursor garbage", "?cursor=%00%01", "cursor is not one"},
		{"cursor not base64 json", "?cursor=" + base64.RawURLEncoding.EncodeToString([]byte("[1,2]")), "cursor is not one"},
		{"cursor too long", "?cursor=" + strings.Repeat("A", maxCursorLen+1), "cursor is not one"},
		{"cursor of another listing", "?session=victim&cursor=" + first.NextCursor, "other filters"},
		{"cursor with a negative place", "?cursor=" + base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"a":-1,"s":"x","c":"y","f":""}`)), "cursor is not one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := f.do("GET", "/v1/pending"+tc.query, nil)
			var e errorBody
			_ = json.Unmarshal(body, &e)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Error, tc.want) {
				t.Errorf("%d %s, want 400 saying %q", resp.StatusCode, body, tc.want)
			}
		})
	}
	// A forged cursor moves where the listing starts, never its filters.
	p, _ := f.getPending("?session=mine&cursor=" + base64.RawURLEncoding.EncodeToString(forged))
	for _, c := range p.Confirmations {
		if c["session"] != "mine" {
			t.Errorf("a cursor forged to point at another session listed %v", c)
		}
	}
	if len(p.Confirmations) != 3 {
		t.Errorf("a forged cursor gave %d of mine's 3 items", len(p.Confirmations))
	}
	huge, _ := f.getPending("?limit=1000000")
	if huge.Limit != maxPendingLimit || len(huge.Confirmations) != 6 {
		t.Errorf("a huge limit was applied as %d (%d items), want %d", huge.Limit, len(huge.Confirmations), maxPendingLimit)
	}
	for _, v := range []string{"%00", "..%2F..", "%E2%80%AE", "*", "%25", "victim%00"} {
		got, _ := f.getPending("?session=" + v + "&tool=" + v + "&run=" + v)
		if len(got.Confirmations) != 0 {
			t.Errorf("filters of %q listed %d items", v, len(got.Confirmations))
		}
	}
}

// opCounter is a seam hook counting the operations of each kind.
type opCounter struct {
	mu  sync.Mutex
	ops map[seam.Kind]int
}

func (c *opCounter) Before(_ context.Context, op *seam.Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops[op.Kind]++
	return nil
}

func (c *opCounter) After(_ context.Context, _ *seam.Op, err error) error { return err }

func (c *opCounter) take() map[seam.Kind]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.ops
	c.ops = map[seam.Kind]int{}
	return out
}

// TestPendingReadsTheIndexOnly: the listing reads the store's index of
// what waits and nothing else — no session's turns, no approval records —
// and with include=turn one turn per turn of the page.
func TestPendingReadsTheIndexOnly(t *testing.T) {
	counter := &opCounter{ops: map[seam.Kind]int{}}
	f := newFixture(t, fixtureOpts{history: func(s cachestore.Store) cachestore.History { return seam.Wrap(s, counter) }})
	for i := range 3 {
		f.postTurn(fmt.Sprintf("s%d", i), deferredTurn("r", edits(t, "e", 4)...))
	}
	counter.take()
	if p, _ := f.getPending("?limit=5"); len(p.Confirmations) != 5 {
		t.Fatalf("%d items, want 5", len(p.Confirmations))
	}
	if ops := counter.take(); len(ops) != 1 || ops[seam.ListWaiting] != 1 {
		t.Errorf("a page read %v of the store, want one list_waiting", ops)
	}
	if p, _ := f.getPending("?limit=12&include=turn"); len(p.Turns) != 3 {
		t.Fatalf("%d turns, want 3", len(p.Turns))
	}
	if ops := counter.take(); len(ops) != 2 || ops[seam.ListWaiting] != 1 || ops[seam.TurnByNumber] != 3 {
		t.Errorf("a page with its turns read %v of the store, want one list_waiting and 3 turn_by_number", ops)
	}
}
