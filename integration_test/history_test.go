package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/tooldispatch/tooldispatch/service/client"
)

// history records every client operation on a cluster's sessions — each
// turn posted (its session, turn_id and calls) with what came back, and at
// the end one read of every session touched — and checks it with
// porcupine against a model of a session (sessionModel): turns applied
// once each, in order, numbered without gaps; no answered turn missing from
// the session; a replayed turn_id answering `replayed` with the turn's
// number and messages; an answer that says nothing ran having run nothing.
// An operation whose outcome the client cannot know (a broken connection,
// a 500, a 503 saying the member left) may have taken effect at any time
// after it was sent, or never.
type history struct {
	t     *testing.T
	logs  *memberLogs
	start time.Time

	mu  sync.Mutex
	ops []*histOp // guarded by mu
}

// histOp is one recorded operation.
type histOp struct {
	h        *history
	client   int
	in       histInput
	out      histOutput
	call     int64
	ret      int64
	finished bool
}

// histInput is what an operation asked.
type histInput struct {
	Read    bool   // a read of the session at the end
	Session string //
	TurnID  string // "" for a turn without one
	Calls   string // the turn's call ids, in order, joined by ","
	Op      int    // the operation's index
}

// What an answer says of a turn.
const (
	outOK       = "ok"       // 200: the turn ran and was committed now
	outReplayed = "replayed" // 200 with replayed: committed before, nothing ran
	outNothing  = "nothing"  // refused before anything ran (says so)
	outUnknown  = "unknown"  // anything else: it may or may not have run
	outRead     = "read"     // the session read at the end
)

// histOutput is what came back.
type histOutput struct {
	Kind   string
	Turn   int64  // the turn's number (ok, replayed)
	Msgs   string // the turn's messages, canonical (ok, replayed)
	Turns  string // the session's turns, encoded as in sessionState (read)
	Detail string // the status and error, for reports
}

// newHistory starts a history of t's cluster, whose members' logs are
// logs (the history and, on a violation, its picture are written there).
func newHistory(t *testing.T, logs *memberLogs) *history {
	return &history{t: t, logs: logs, start: time.Now()}
}

func (h *history) now() int64 { return int64(time.Since(h.start)) }

// begin records that a turn of session with turnID and the calls' ids was
// sent by client.
func (h *history) begin(client int, session, turnID string, callIDs []string) *histOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	o := &histOp{h: h, client: client, call: h.now(),
		in: histInput{Session: session, TurnID: turnID, Calls: strings.Join(callIDs, ","), Op: len(h.ops)}}
	h.ops = append(h.ops, o)
	return o
}

// end records the answer to o: an HTTP status and body, or the error of a
// request that got none.
func (o *histOp) end(status int, body []byte, err error) {
	out := classify(status, body, err)
	h := o.h
	h.mu.Lock()
	defer h.mu.Unlock()
	o.ret, o.out, o.finished = h.now(), out, true
}

// classify says what an answer tells of a turn.
func classify(status int, body []byte, err error) histOutput {
	if err != nil {
		var op *net.OpError
		if errors.Is(err, client.ErrNoMember) || (errors.As(err, &op) && op.Op == "dial") {
			// No member could be dialed: nothing was sent.
			return histOutput{Kind: outNothing, Detail: err.Error()}
		}
		return histOutput{Kind: outUnknown, Detail: err.Error()}
	}
	var r struct {
		Turn     int64 `json:"turn"`
		Replayed bool  `json:"replayed"`
		Messages []struct {
			ToolCallID string `json:"tool_call_id"`
			Status     string `json:"status"`
			Content    string `json:"content"`
		} `json:"messages"`
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &r) != nil {
		return histOutput{Kind: outUnknown, Detail: fmt.Sprintf("%d %.200s", status, body)}
	}
	detail := fmt.Sprintf("%d %s", status, r.Error)
	switch {
	case status == http.StatusOK:
		var msgs []string
		for _, m := range r.Messages {
			msgs = append(msgs, msgKey(m.ToolCallID, m.Status, m.Content))
		}
		kind := outOK
		if r.Replayed {
			kind = outReplayed
		}
		return histOutput{Kind: kind, Turn: r.Turn, Msgs: strings.Join(msgs, ";"), Detail: detail}
	case saysNothingRan(status, r.Error):
		return histOutput{Kind: outNothing, Detail: detail}
	}
	return histOutput{Kind: outUnknown, Detail: detail}
}

// saysNothingRan reports whether a turn's answer says that nothing of it
// ran: a request refused as bad or conflicting, or a 503 of a member that
// shuts down (it refuses turns before dispatching them, and a turn that a
// draining member's grain did not take ends so: actors.ErrClosed) or that
// reached no grain (actors.ErrNoHost, "…nothing ran…").
func saysNothingRan(status int, msg string) bool {
	switch status {
	case http.StatusBadRequest, http.StatusConflict:
		return true
	case http.StatusServiceUnavailable:
		return msg == "the service is shutting down" ||
			strings.HasPrefix(msg, "this member is shutting down; the session's next owner is ") ||
			strings.Contains(msg, "nothing ran")
	}
	return false
}

// msgKey is a tool message as the model compares it.
func msgKey(id, status, content string) string {
	b, _ := json.Marshal([]string{id, status, content})
	return string(b)
}

// post posts a turn through hc to the member at base, as postTurnWith
// does, and records it.
func (h *history) post(ctx context.Context, hc *http.Client, base, session, turnID string, calls ...map[string]any) (*turnReply, error) {
	var ids []string
	for _, c := range calls {
		ids = append(ids, fmt.Sprint(c["id"]))
	}
	o := h.begin(0, session, turnID, ids)
	r, status, body, err := postTurnRaw(ctx, hc, base, session, turnID, calls...)
	o.end(status, body, err)
	return r, turnError(r, status, err)
}

// postTurn is post through http.DefaultClient.
func (h *history) postTurn(ctx context.Context, base, session, turnID string, calls ...map[string]any) (*turnReply, error) {
	return h.post(ctx, http.DefaultClient, base, session, turnID, calls...)
}

// turn posts a turn (a request body with "turn_id" and "message") through
// the Go client c, and records it.
func (h *history) turn(ctx context.Context, c *client.Client, session string, body map[string]any) (*client.Response, error) {
	turnID, _ := body["turn_id"].(string)
	var ids []string
	if msg, ok := body["message"].(map[string]any); ok {
		switch calls := msg["tool_calls"].(type) {
		case []map[string]any:
			for _, call := range calls {
				ids = append(ids, fmt.Sprint(call["id"]))
			}
		case []any:
			for _, call := range calls {
				if m, ok := call.(map[string]any); ok {
					ids = append(ids, fmt.Sprint(m["id"]))
				}
			}
		}
	}
	o := h.begin(0, session, turnID, ids)
	res, err := c.Turn(ctx, session, body)
	if err != nil {
		o.end(0, nil, err)
	} else {
		o.end(res.Status, res.Body, nil)
	}
	return res, err
}

// sessionTurn is one turn of a session as the model holds it.
type sessionTurn struct {
	key   string // the turn_id, or "#op" for a turn without one
	calls string // its call ids, joined by ","
	msgs  string // its messages, canonical; "?" while no answer told them
}

// A session's state is its committed turns in order, encoded as a string
// (one line per turn: key, calls, messages, tab-separated) so that states
// compare with ==.
func encodeTurns(ts []sessionTurn) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "%s\t%s\t%s\n", t.key, t.calls, t.msgs)
	}
	return b.String()
}

func decodeTurns(s string) []sessionTurn {
	var ts []sessionTurn
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "\t", 3)
		ts = append(ts, sessionTurn{key: f[0], calls: f[1], msgs: f[2]})
	}
	return ts
}

// turnKey is the key a turn is committed under in the model: its
// turn_id, or for a turn without one "#" and its calls (such turns sent
// again are new turns, told apart by nothing but their place).
func turnKey(in histInput) string {
	if in.TurnID != "" {
		return in.TurnID
	}
	return "#" + in.Calls
}

// sessionModel is the sequential specification of one session.
var sessionModel = porcupine.NondeterministicModel{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var order []string
		for _, o := range ops {
			s := o.Input.(histInput).Session
			if _, ok := by[s]; !ok {
				order = append(order, s)
			}
			by[s] = append(by[s], o)
		}
		var out [][]porcupine.Operation
		for _, s := range order {
			out = append(out, by[s])
		}
		return out
	},
	Init: func() []any { return []any{""} },
	Step: func(state, input, output any) []any {
		return sessionStep(state.(string), input.(histInput), output.(histOutput))
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(histInput), output.(histOutput)
		if in.Read {
			return fmt.Sprintf("read %s → %d turns", in.Session, len(decodeTurns(out.Turns)))
		}
		return fmt.Sprintf("turn %s [%s] → %s %d (%s)", turnKey(in), in.Calls, out.Kind, out.Turn, out.Detail)
	},
	DescribeState: func(state any) string {
		var keys []string
		for _, t := range decodeTurns(state.(string)) {
			keys = append(keys, t.key)
		}
		return "[" + strings.Join(keys, " ") + "]"
	},
}

// sessionStep returns the states the session can be in after an operation
// with that answer (none: the answer is impossible from state).
func sessionStep(state string, in histInput, out histOutput) []any {
	ts := decodeTurns(state)
	if in.Read {
		got := decodeTurns(out.Turns)
		if len(got) != len(ts) {
			return nil
		}
		next := slices.Clone(ts)
		for i := range ts {
			if got[i].calls != ts[i].calls || (ts[i].msgs != "?" && got[i].msgs != ts[i].msgs) {
				return nil
			}
			next[i].msgs = got[i].msgs
		}
		return []any{encodeTurns(next)}
	}
	key := turnKey(in)
	at := slices.IndexFunc(ts, func(t sessionTurn) bool { return t.key == key })
	if in.TurnID == "" {
		at = -1 // every turn without a turn_id is a turn of its own
	}
	switch out.Kind {
	case outNothing:
		return []any{state}
	case outUnknown:
		if at >= 0 {
			return []any{state}
		}
		return []any{state, encodeTurns(append(ts, sessionTurn{key: key, calls: in.Calls, msgs: "?"}))}
	case outOK:
		if at >= 0 || out.Turn != int64(len(ts)+1) {
			return nil
		}
		return []any{encodeTurns(append(ts, sessionTurn{key: key, calls: in.Calls, msgs: out.Msgs}))}
	case outReplayed:
		if at < 0 || out.Turn != int64(at+1) || ts[at].calls != in.Calls || (ts[at].msgs != "?" && ts[at].msgs != out.Msgs) {
			return nil
		}
		next := slices.Clone(ts)
		next[at].msgs = out.Msgs
		return []any{encodeTurns(next)}
	}
	return nil
}

// historyFigures is what a check counted.
type historyFigures struct {
	ops, sessions, violations                  int
	ok, replayed, nothing, unknown, unfinished int
}

// check reads every session the history touched (from the first member
// of ms that answers) and checks each session's history with porcupine:
// every violation fails the test, and its history and porcupine's picture
// of it are written beside the members' logs.
func (h *history) check(ms []*member, hc *http.Client) historyFigures {
	t := h.t
	t.Helper()
	h.mu.Lock()
	sessions := map[string]bool{}
	for _, o := range h.ops {
		sessions[o.in.Session] = true
	}
	h.mu.Unlock()
	var names []string
	for s := range sessions {
		names = append(names, s)
	}
	sort.Strings(names)
	for _, s := range names {
		h.read(ms, hc, s)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	f := historyFigures{ops: len(h.ops), sessions: len(names)}
	by := map[string][]porcupine.Operation{}
	for _, o := range h.ops {
		ret, out := o.ret, o.out
		if !o.finished {
			// Still in flight: it may take effect at any time.
			f.unfinished++
			out = histOutput{Kind: outUnknown, Detail: "no answer yet"}
		}
		if out.Kind == outUnknown {
			ret = math.MaxInt64
		}
		switch out.Kind {
		case outOK:
			f.ok++
		case outReplayed:
			f.replayed++
		case outNothing:
			f.nothing++
		case outUnknown:
			f.unknown++
		}
		by[o.in.Session] = append(by[o.in.Session], porcupine.Operation{ClientId: o.client, Input: o.in, Call: o.call, Output: out, Return: ret})
	}
	model := sessionModel.ToModel()
	for _, s := range names {
		res, info := porcupine.CheckOperationsVerbose(model, by[s], time.Minute)
		if res == porcupine.Ok {
			continue
		}
		f.violations++
		var lines []string
		for _, o := range by[s] {
			lines = append(lines, fmt.Sprintf("[%d, %d] %s", o.Call, o.Return, model.DescribeOperation(o.Input, o.Output)))
		}
		name := strings.NewReplacer("/", "_").Replace(s)
		_ = h.logs.write("history-"+name+".txt", []byte(strings.Join(lines, "\n")+"\n"))
		var pic strings.Builder
		if porcupine.Visualize(model, info, &pic) == nil {
			_ = h.logs.write("history-"+name+".html", []byte(pic.String()))
		}
		t.Errorf("session %s: porcupine found its history %s against the session model (%d operations):\n%s",
			s, map[porcupine.CheckResult]string{porcupine.Illegal: "not linearizable", porcupine.Unknown: "undecided in a minute"}[res],
			len(by[s]), strings.Join(lines, "\n"))
	}
	t.Logf("history: %d operations on %d sessions checked by porcupine (ok %d, replayed %d, nothing ran %d, outcome unknown %d of which %d unanswered), violations %d; answers other than 200: %s",
		f.ops, f.sessions, f.ok, f.replayed, f.nothing, f.unknown, f.unfinished, f.violations, h.others())
	return f
}

// others counts the answers other than 200 by kind (their status and
// error, numbers left out). Called with h.mu held.
func (h *history) others() string {
	digits := regexp.MustCompile(`[0-9]+`)
	n := map[string]int{}
	for _, o := range h.ops {
		if o.finished && !o.in.Read && o.out.Kind != outOK && o.out.Kind != outReplayed {
			d := digits.ReplaceAllString(o.out.Detail, "N")
			if len(d) > 90 {
				d = d[:90] + "…"
			}
			n[o.out.Kind+": "+d]++
		}
	}
	var out []string
	for k, c := range n {
		out = append(out, fmt.Sprintf("%d × %s", c, k))
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// read records a read of session's turns from the first member of ms that
// answers.
func (h *history) read(ms []*member, hc *http.Client, session string) {
	t := h.t
	t.Helper()
	for _, m := range ms {
		h.mu.Lock()
		o := &histOp{h: h, call: h.now(), in: histInput{Read: true, Session: session, Op: len(h.ops)}}
		h.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		turns, err := readTurns(ctx, hc, m.http, session)
		cancel()
		if err != nil {
			continue
		}
		h.mu.Lock()
		o.ret, o.finished = h.now(), true
		o.out = histOutput{Kind: outRead, Turns: encodeTurns(turns)}
		h.ops = append(h.ops, o)
		h.mu.Unlock()
		return
	}
	t.Errorf("no member answered a read of session %s", session)
}

// readTurns reads a session's turns: each assistant message's calls and
// the tool messages after it.
func readTurns(ctx context.Context, hc *http.Client, base, session string) ([]sessionTurn, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/sessions/"+session, nil)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	var sess struct {
		ToolHistories []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			Status     string `json:"status"`
			Content    string `json:"content"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"tool_histories"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&sess); err != nil {
		return nil, err
	}
	var turns []sessionTurn
	var msgs []string
	flush := func() {
		if len(turns) > 0 {
			turns[len(turns)-1].msgs = strings.Join(msgs, ";")
		}
		msgs = nil
	}
	for _, m := range sess.ToolHistories {
		switch m.Role {
		case "assistant":
			flush()
			var ids []string
			for _, c := range m.ToolCalls {
				ids = append(ids, c.ID)
			}
			turns = append(turns, sessionTurn{calls: strings.Join(ids, ",")})
		default: // a tool message
			msgs = append(msgs, msgKey(m.ToolCallID, m.Status, m.Content))
		}
	}
	flush()
	return turns, nil
}

// TestSessionModelFindsViolations feeds the session model histories that
// a session cannot give — a turn applied twice, an answered turn missing
// from the session, turns out of order, a replay with other messages, a
// turn that said nothing ran and ran — and one that it can: porcupine
// must refuse each of the first and accept the last.
func TestSessionModelFindsViolations(t *testing.T) {
	m1 := msgKey("a", "ok", "")
	m2 := msgKey("b", "ok", "")
	turn := func(call, ret int64, id, calls, kind string, n int64, msgs string) porcupine.Operation {
		return porcupine.Operation{Input: histInput{Session: "s", TurnID: id, Calls: calls}, Call: call, Return: ret,
			Output: histOutput{Kind: kind, Turn: n, Msgs: msgs}}
	}
	read := func(call int64, ts ...sessionTurn) porcupine.Operation {
		return porcupine.Operation{Input: histInput{Session: "s", Read: true}, Call: call, Return: call + 1,
			Output: histOutput{Kind: outRead, Turns: encodeTurns(ts)}}
	}
	a := sessionTurn{calls: "a", msgs: m1}
	b := sessionTurn{calls: "b", msgs: m2}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"a turn, its replay after a broken connection, another turn", []porcupine.Operation{
			turn(0, math.MaxInt64, "t1", "a", outUnknown, 0, ""),
			turn(10, 20, "t1", "a", outReplayed, 1, m1),
			turn(30, 40, "t2", "b", outOK, 2, m2),
			read(50, a, b)}, true},
		{"a refused turn sent again", []porcupine.Operation{
			turn(0, 5, "t1", "a", outNothing, 0, ""),
			turn(10, 20, "t1", "a", outOK, 1, m1),
			read(50, a)}, true},
		{"turns without a turn_id sent again after broken connections: each may have run", []porcupine.Operation{
			turn(0, math.MaxInt64, "", "a", outUnknown, 0, ""),
			turn(10, math.MaxInt64, "", "a", outUnknown, 0, ""),
			turn(20, 30, "", "a", outOK, 2, m1),
			read(50, a, a)}, true},
		{"applied twice", []porcupine.Operation{
			turn(0, 5, "t1", "a", outOK, 1, m1),
			turn(10, 20, "t1", "a", outOK, 2, m1),
			read(50, a, a)}, false},
		{"an answered turn lost", []porcupine.Operation{
			turn(0, 5, "t1", "a", outOK, 1, m1),
			turn(10, 20, "t2", "b", outOK, 2, m2),
			read(50, a)}, false},
		{"out of order", []porcupine.Operation{
			turn(0, 5, "t1", "a", outOK, 1, m1),
			turn(10, 20, "t2", "b", outOK, 2, m2),
			read(50, b, a)}, false},
		{"a number skipped", []porcupine.Operation{
			turn(0, 5, "t1", "a", outOK, 2, m1),
			read(50, a)}, false},
		{"a replay with other messages", []porcupine.Operation{
			turn(0, 5, "t1", "a", outOK, 1, m1),
			turn(10, 20, "t1", "a", outReplayed, 1, msgKey("a", "error", "")),
			read(50, a)}, false},
		{"said nothing ran, and ran", []porcupine.Operation{
			turn(0, 5, "t1", "a", outNothing, 0, ""),
			turn(10, 20, "t1", "a", outReplayed, 1, m1),
			read(50, a)}, false},
		{"said nothing ran, and is in the session", []porcupine.Operation{
			turn(0, 5, "t1", "a", outNothing, 0, ""),
			read(50, a)}, false},
	} {
		got := porcupine.CheckOperations(sessionModel.ToModel(), tc.ops)
		if got != tc.ok {
			t.Errorf("%s: linearizable %v, want %v", tc.name, got, tc.ok)
		}
	}
}

// TestClassifyAnswers: what the recorder makes of an answer.
func TestClassifyAnswers(t *testing.T) {
	dial := &url.Error{Op: "Post", URL: "http://127.0.0.1:1", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	reset := &url.Error{Op: "Post", URL: "http://127.0.0.1:1", Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}
	for _, tc := range []struct {
		status int
		body   string
		err    error
		want   string
	}{
		{200, `{"turn":3,"messages":[{"tool_call_id":"a","status":"ok","content":""}]}`, nil, outOK},
		{200, `{"turn":3,"replayed":true,"messages":[]}`, nil, outReplayed},
		{0, "", dial, outNothing},
		{0, "", fmt.Errorf("%w: %v", client.ErrNoMember, dial), outNothing},
		{0, "", reset, outUnknown},
		{503, `{"error":"the service is shutting down"}`, nil, outNothing},
		{503, `{"error":"this member is shutting down; the session's next owner is http://127.0.0.1:2"}`, nil, outNothing},
		{503, `{"error":"no cluster member could host the session now; nothing ran, send the turn again"}`, nil, outNothing},
		{503, `{"error":"the cluster member running the turn left the cluster; calls that may have started read outcome_unknown once the session is loaded again"}`, nil, outUnknown},
		{503, `{"error":"the turn failed: x"}`, nil, outUnknown},
		{500, `{"error":"the turn failed"}`, nil, outUnknown},
		{409, `{"error":"turn id t1 was committed with other calls"}`, nil, outNothing},
		{502, `<html>`, nil, outUnknown},
	} {
		if got := classify(tc.status, []byte(tc.body), tc.err); got.Kind != tc.want {
			t.Errorf("%d %s %v: %s, want %s", tc.status, tc.body, tc.err, got.Kind, tc.want)
		}
	}
}
