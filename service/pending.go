package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// GET /v1/pending lists what waits for an answer a page at a time: the
// confirmations running turns wait on (this member's broker) and the
// deferred approvals the store keeps (its index of what waits, every
// member's), merged in the order they were asked. An item carries its own
// call and names its turn; the turns' text and calls come once per turn,
// on request (include=turn), read one turn at a time.

// PendingView is a confirmation that waits, as GET /v1/pending and the
// operator page show it: the call, what it would change, and until when
// it waits.
type PendingView struct {
	Session string `json:"session"`
	Run     string `json:"run"`
	Turn    int64  `json:"turn"`
	// TurnID is the id the turn was sent with, when it had one.
	TurnID    string    `json:"turn_id,omitempty"`
	CallID    string    `json:"call_id"`
	Tool      string    `json:"tool"`
	Arguments string    `json:"arguments"`
	ArgsHash  string    `json:"args_hash"`
	Question  string    `json:"question"`
	Since     time.Time `json:"since"`
	// Diff and Note preview a call that changes workspace files; StateHash
	// is the hash of the files' state its approval is bound to (a blocking
	// confirmation's).
	Diff      string `json:"diff,omitempty"`
	Note      string `json:"note,omitempty"`
	StateHash string `json:"state_hash,omitempty"`
	// Command is a run_command call's argv as one shell-quoted line (or its
	// shell line).
	Command string `json:"command,omitempty"`
	// Request is an http_request call's method and URL, and what else it
	// sends (header names, the body's size).
	Request string `json:"request,omitempty"`
	// MCPServer names the MCP server an MCP tool's call goes to.
	MCPServer string `json:"mcp_server,omitempty"`
	// TimeoutAt is when the confirmation stops waiting and the call is
	// skipped; absent for a deferred approval, which waits until answered.
	TimeoutAt *time.Time `json:"timeout_at,omitempty"`
	// Deferred: the call was committed awaiting_approval (confirm defer)
	// and its approval is kept in the store: it waits, across restarts,
	// until someone answers it on any member.
	Deferred bool `json:"deferred,omitempty"`
	// Ceiling is the approval the run had when a deferred call asked.
	Ceiling string `json:"ceiling,omitempty"`

	live *PendingConfirm // the broker's, for a confirmation a running turn waits on
}

// pos is the item's place in the listing.
func (v *PendingView) pos() cachestore.WaitingPos {
	return cachestore.WaitingPos{Asked: cachestore.AskedNanos(v.Since), Session: v.Session, CallID: v.CallID}
}

// size estimates the item's bytes, for the page's byte bound.
func (v *PendingView) size() int {
	return 400 + len(v.Session) + len(v.Run) + len(v.TurnID) + len(v.CallID) + len(v.Tool) + len(v.Arguments) +
		len(v.ArgsHash) + len(v.Question) + len(v.Diff) + len(v.Note) + len(v.Command) + len(v.Request)
}

// PendingTurn is a turn of the page's items (include=turn): the model's
// text of it and its calls with their states, bounded.
type PendingTurn struct {
	Session string `json:"session"`
	Run     string `json:"run"`
	Turn    int64  `json:"turn"`
	TurnID  string `json:"turn_id,omitempty"`
	// Text is the model's own text of the turn (redacted, cut at 4 KiB).
	Text string `json:"text,omitempty"`
	// Calls are the turn's first maxTurnCalls calls in call order, each
	// with its state; CallsOmitted counts the others.
	Calls        []TurnCallView `json:"calls"`
	CallsOmitted int            `json:"calls_omitted,omitempty"`
	// Asking names the call a running turn waits on (it asks one at a
	// time), and Next the calls after it that will ask once it is
	// answered, with what they would change; NextOmitted counts those
	// beyond the bound.
	Asking      string     `json:"asking,omitempty"`
	Next        []NextView `json:"next,omitempty"`
	NextOmitted int        `json:"next_omitted,omitempty"`
}

// TurnCallView is one call of a turn.
type TurnCallView struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Status is a state or final status code, Words its plain words.
	Status string `json:"status"`
	Words  string `json:"words"`
	// This marks the call the confirmation asks about (on the page).
	This bool `json:"this,omitempty"`
}

// NextView is an upcoming call that will ask, as the page previews it.
// Its diff, for a call that changes files, is computed when it is asked.
type NextView struct {
	UpcomingCall
	Command   string `json:"command,omitempty"`
	Request   string `json:"request,omitempty"`
	MCPServer string `json:"mcp_server,omitempty"`
}

// maxTurnCalls bounds the calls, and the next calls, a PendingTurn lists.
const maxTurnCalls = maxSummaryCalls

// pendingReply is the body of GET /v1/pending.
type pendingReply struct {
	Confirmations []PendingView `json:"confirmations"`
	// Questions are the questions that wait (first page only).
	Questions []PendingQuestion `json:"questions"`
	// Turns are the turns of the confirmations, once each (include=turn).
	Turns []PendingTurn `json:"turns,omitempty"`
	// Limit is the page's limit as applied.
	Limit int `json:"limit"`
	// NextCursor, when set, gives the next page (cursor=…); absent at the end.
	NextCursor string `json:"next_cursor,omitempty"`
}

// handlePending serves GET /v1/pending.
func (s *Server) handlePending(w http.ResponseWriter, r *http.Request) {
	q, e := parsePendingQuery(r.URL.Query(), time.Now())
	if e != nil {
		writeError(w, e)
		return
	}
	reply, err := s.pendingPage(r.Context(), q)
	if err != nil {
		s.dispatcherError(w, "listing what waits", err)
		return
	}
	writeJSON(w, http.StatusOK, reply)
}

// pendingPage gathers one page of GET /v1/pending.
func (s *Server) pendingPage(ctx context.Context, q *pendingQuery) (*pendingReply, error) {
	stored, err := s.opts.Store.ListWaiting(ctx, q.q)
	if err != nil {
		return nil, err
	}
	live := s.livePending(q)
	items := make([]PendingView, 0, len(stored.Items)+len(live))
	for _, v := range live {
		// A live item after the place the stored page reached would pass
		// over stored ones not read yet: it comes with a later page.
		if stored.Next == nil || v.pos().Compare(*stored.Next) <= 0 {
			items = append(items, v)
		}
	}
	for _, w := range stored.Items {
		if !slices.ContainsFunc(live, func(v PendingView) bool { return v.Session == w.Session && v.CallID == w.CallID }) {
			items = append(items, deferredView(w))
		}
	}
	slices.SortFunc(items, func(a, b PendingView) int { return a.pos().Compare(b.pos()) })
	reply := &pendingReply{Limit: q.q.Limit}
	next := stored.Next
	bytes := 0
	for i := range items {
		if i == q.q.Limit || (i > 0 && bytes >= pendingPageBytes) {
			next = new(items[i-1].pos())
			break
		}
		reply.Confirmations = append(reply.Confirmations, items[i])
		bytes += items[i].size()
	}
	if next != nil {
		reply.NextCursor = encodeCursor(*next, q.filters)
	}
	reply.Confirmations = nonNil(reply.Confirmations)
	reply.Questions = []PendingQuestion{}
	if q.first {
		reply.Questions = s.pendingQuestions(q)
	}
	if q.turns {
		if reply.Turns, err = s.pendingTurns(ctx, reply.Confirmations); err != nil {
			return nil, err
		}
	}
	return reply, nil
}

// livePending is what running turns on this member wait on that passes
// the query, after its place, in order.
func (s *Server) livePending(q *pendingQuery) []PendingView {
	var out []PendingView
	for _, p := range s.opts.Broker.Pending(q.q.Session) {
		v := s.liveView(p)
		if (q.q.After != nil && v.pos().Compare(*q.q.After) <= 0) || !q.q.Matches(v.waiting()) {
			continue
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b PendingView) int { return a.pos().Compare(b.pos()) })
	return out
}

// waiting is the item as the filters see it.
func (v *PendingView) waiting() *cachestore.Waiting {
	return &cachestore.Waiting{Session: v.Session, Run: v.Run, Tool: v.Tool, CallID: v.CallID, Asked: v.Since}
}

// pendingQuestions are the questions that wait and pass the query's
// filters.
func (s *Server) pendingQuestions(q *pendingQuery) []PendingQuestion {
	out := []PendingQuestion{}
	for _, p := range s.opts.Broker.Questions(q.q.Session) {
		w := &cachestore.Waiting{Session: p.Session, Run: p.Run, Tool: p.Tool, CallID: p.CallID, Asked: p.Since}
		if q.q.Matches(w) {
			out = append(out, p)
		}
	}
	return out
}

// liveView is what a confirmation a running turn waits on shows. The
// preview of a call that changes workspace files (Diff, Note) was
// computed by the dispatcher when it asked, from the files its approval is
// bound to; it is shown as it came, never recomputed.
func (s *Server) liveView(p PendingConfirm) PendingView {
	at := p.Since.Add(s.opts.Dispatcher.ConfirmTimeout())
	v := PendingView{Session: p.Session, Run: p.Run, Turn: p.Turn, CallID: p.CallID, Tool: p.Tool, Arguments: p.Arguments,
		ArgsHash: p.ArgsHash, Question: p.Question, Since: p.Since, Diff: p.Diff, Note: p.Note, StateHash: p.StateHash,
		TimeoutAt: &at, live: &p}
	v.Command, v.Request, v.MCPServer = change(p.Tool, p.Arguments)
	return v
}

// deferredView is what a deferred approval of the store's index shows.
func deferredView(w *cachestore.Waiting) PendingView {
	v := PendingView{Session: w.Session, Run: w.Run, Turn: w.Turn, TurnID: w.TurnID, CallID: w.CallID, Tool: w.Tool,
		Arguments: w.Shown, ArgsHash: w.ArgsHash, Since: w.Asked, Diff: w.Diff, Note: w.Note, Deferred: true, Ceiling: w.Ceiling,
		Question: fmt.Sprintf("Allow %s to run with these arguments? It is not read-only. The turn did not wait: answer whenever you like.", w.Tool)}
	v.Command, v.Request, v.MCPServer = change(w.Tool, v.Arguments)
	return v
}

// pendingTurns are the turns of the items, once each, in the order of
// their first item: a running turn's from the broker, a committed one's
// read from the store alone (a turn no longer there is left out).
func (s *Server) pendingTurns(ctx context.Context, items []PendingView) ([]PendingTurn, error) {
	out := []PendingTurn{}
	seen := map[[2]string]bool{}
	for _, v := range items {
		k := [2]string{v.Session, fmt.Sprint(v.Turn)}
		if seen[k] {
			continue
		}
		seen[k] = true
		if v.live != nil {
			out = append(out, s.liveTurn(*v.live))
			continue
		}
		rec, err := s.opts.Store.TurnByNumber(ctx, v.Session, v.Turn)
		if errors.Is(err, cachestore.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s.committedTurn(v.Session, rec))
	}
	return out, nil
}

// maxShownTurnText is how much of the model's text a turn shows.
const maxShownTurnText = 4096

// committedTurn is a committed turn as a listing shows it: the model's
// text (redacted and cut as the live events show it) and its calls with
// their committed statuses.
func (s *Server) committedTurn(session string, rec *messages.TurnRecord) PendingTurn {
	t := PendingTurn{Session: session, Run: rec.GetRun(), Turn: rec.GetTurn(), TurnID: rec.GetTurnId(), Calls: []TurnCallView{},
		Text: s.opts.Dispatcher.ShownText(strings.TrimSpace(rec.GetAssistant().GetContent()), maxShownTurnText)}
	for _, m := range rec.GetToolMessages() {
		if len(t.Calls) == maxTurnCalls {
			t.CallsOmitted++
			continue
		}
		t.Calls = append(t.Calls, TurnCallView{CallID: m.GetToolCallId(), Tool: m.GetName(), Status: m.GetStatus(), Words: statusText(m.GetStatus())})
	}
	return t
}

// liveTurn is the turn of a confirmation a running turn waits on: its text
// as the event gave it, its calls with their states (the checked ones as
// far as the broker saw them, then the upcoming ones) and the upcoming
// calls that will ask.
func (s *Server) liveTurn(p PendingConfirm) PendingTurn {
	t := PendingTurn{Session: p.Session, Run: p.Run, Turn: p.Turn, Text: p.TurnText, Asking: p.CallID, Calls: []TurnCallView{}}
	calls, omitted := s.turnCalls(p)
	t.Calls, t.CallsOmitted = calls, omitted
	for _, u := range p.Upcoming {
		if !u.Asks {
			continue
		}
		if len(t.Next) == maxTurnCalls {
			t.NextOmitted++
			continue
		}
		n := NextView{UpcomingCall: u}
		n.Command, n.Request, n.MCPServer = change(u.Tool, u.Arguments)
		t.Next = append(t.Next, n)
	}
	return t
}

// turnCalls lists the calls of p's turn with their states, at most
// maxTurnCalls (and how many more): those the broker's summary of the turn
// holds, then p's upcoming ones.
func (s *Server) turnCalls(p PendingConfirm) ([]TurnCallView, int) {
	var out []TurnCallView
	omitted := 0
	add := func(c TurnCallView) {
		if len(out) == maxTurnCalls {
			omitted++
			return
		}
		out = append(out, c)
	}
	for _, t := range s.opts.Broker.Recent(p.Session) {
		if t.Turn != p.Turn {
			continue
		}
		omitted += t.Omitted
		before := true // pass 1 checks calls in order: those before p passed
		for _, c := range t.Calls {
			st := c.Shown()
			if st == StateChecking && before {
				st = StateReady
			}
			this := c.CallID == p.CallID
			before = before && !this
			add(TurnCallView{CallID: c.CallID, Tool: c.Tool, Status: st, Words: statusText(st), This: this})
		}
	}
	for _, u := range p.Upcoming {
		st := cmp.Or(map[bool]string{true: StateNext}[u.Asks], StateUpcoming)
		add(TurnCallView{CallID: u.CallID, Tool: u.Tool, Status: st, Words: statusText(st)})
	}
	return out, omitted
}
