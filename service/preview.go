package service

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit/builtin"
	"github.com/tooldispatch/tooldispatch/toolkit/mcp"
	"github.com/tooldispatch/tooldispatch/toolkit/web"
)

// PendingView is a pending confirmation as GET /v1/pending and the
// operator page show it: what would change, and until when it waits.
type PendingView struct {
	PendingConfirm
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
	// Calls are the calls of the turn, this one included, in call order,
	// each with its state: the checked ones as far as the service saw
	// them, then the upcoming ones.
	Calls []TurnCallView `json:"calls,omitempty"`
	// Next are the upcoming calls that will ask when their turn comes,
	// with what they would change.
	Next []NextView `json:"next,omitempty"`
}

// TurnCallView is one call of a pending confirmation's turn.
type TurnCallView struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Status is a state or final status code, Words its plain words.
	Status string `json:"status"`
	Words  string `json:"words"`
	// This marks the call the confirmation asks about.
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

// DiffLines splits Diff into lines with their kind, for the page.
func (v PendingView) DiffLines() []diffLine {
	if v.Diff == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(v.Diff, "\n"), "\n")
	out := make([]diffLine, len(lines))
	for i, l := range lines {
		out[i] = diffLine{Kind: diffKind(l), Text: l}
	}
	return out
}

type diffLine struct {
	Kind string // add, del, hunk, file or ctx
	Text string
}

func diffKind(l string) string {
	switch {
	case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		return "file"
	case strings.HasPrefix(l, "@@"):
		return "hunk"
	case strings.HasPrefix(l, "+"):
		return "add"
	case strings.HasPrefix(l, "-"):
		return "del"
	}
	return "ctx"
}

// pendingViews returns the views of the pending confirmations: those
// running turns wait on (this member's broker), then the deferred
// approvals the store keeps (every member's, across restarts).
func (s *Server) pendingViews(ctx context.Context, ps []PendingConfirm) ([]PendingView, error) {
	out := make([]PendingView, 0, len(ps))
	seen := make(map[[2]string]bool, len(ps))
	for _, p := range ps {
		out = append(out, s.pendingView(p))
		seen[[2]string{p.Session, p.CallID}] = true
	}
	as, err := s.opts.Store.Approvals(ctx, "")
	if err != nil {
		return nil, err
	}
	turns := map[string][]*messages.TurnRecord{} // by session, read once
	for _, a := range as {
		if a.Claimed || seen[[2]string{a.Session, a.CallID}] {
			continue // running now, or also asked by a running turn
		}
		if _, ok := turns[a.Session]; !ok {
			recs, err := s.opts.Store.Turns(ctx, a.Session)
			if err != nil {
				return nil, err
			}
			turns[a.Session] = recs
		}
		v := PendingView{PendingConfirm: PendingConfirm{Session: a.Session, Run: a.Run, Turn: a.Turn, CallID: a.CallID,
			Tool: a.Tool, Arguments: a.Shown, ArgsHash: a.ArgsHash,
			Question: fmt.Sprintf("Allow %s to run with these arguments? It is not read-only. The turn did not wait: answer whenever you like.", a.Tool),
			Since:    a.Asked, Diff: a.Diff, Note: a.Note}, Deferred: true, Ceiling: a.Ceiling}
		v.Command, v.Request, v.MCPServer = change(a.Tool, v.Arguments)
		s.committedTurn(&v, turns[a.Session])
		out = append(out, v)
	}
	return out, nil
}

// pendingView computes what a pending confirmation shows. The preview of a
// call that changes workspace files (Diff, Note) was computed by the
// dispatcher when it asked, from the files its approval is bound to; it is
// shown as it came, never recomputed from the files as they are later.
func (s *Server) pendingView(p PendingConfirm) PendingView {
	at := p.Since.Add(s.opts.Dispatcher.ConfirmTimeout())
	v := PendingView{PendingConfirm: p, TimeoutAt: &at}
	v.Command, v.Request, v.MCPServer = change(p.Tool, p.Arguments)
	v.Calls = s.turnCalls(p)
	for _, u := range p.Upcoming {
		if u.Asks {
			n := NextView{UpcomingCall: u}
			n.Command, n.Request, n.MCPServer = change(u.Tool, u.Arguments)
			v.Next = append(v.Next, n)
		}
	}
	return v
}

// turnCalls lists the calls of p's turn with their states: those the
// broker's summary of the turn holds, then p's upcoming ones.
func (s *Server) turnCalls(p PendingConfirm) []TurnCallView {
	var out []TurnCallView
	for _, t := range s.opts.Broker.Recent(p.Session) {
		if t.Turn != p.Turn {
			continue
		}
		before := true // pass 1 checks calls in order: those before p passed
		for _, c := range t.Calls {
			st := c.Shown()
			if st == StateChecking && before {
				st = StateReady
			}
			this := c.CallID == p.CallID
			before = before && !this
			out = append(out, TurnCallView{CallID: c.CallID, Tool: c.Tool, Status: st, Words: statusText(st), This: this})
		}
	}
	for _, u := range p.Upcoming {
		st := StateUpcoming
		if u.Asks {
			st = StateNext
		}
		out = append(out, TurnCallView{CallID: u.CallID, Tool: u.Tool, Status: st, Words: statusText(st)})
	}
	return out
}

// change shows what a call would change, by its tool, as the tool's own
// package shows it: a run_command call's command line, an http_request
// call's request line, the MCP server an MCP tool's call goes to.
func change(tool, arguments string) (command, request, mcpServer string) {
	switch tool {
	case builtin.RunCommandName:
		return commandLine(arguments), "", ""
	case web.HTTPRequestName:
		return "", requestLine(arguments), ""
	}
	server, _ := mcp.ServerOf(tool)
	return "", "", server
}

// requestLine is web.RequestLine: the request line of an http_request call.
func requestLine(arguments string) string { return web.RequestLine(arguments) }

// commandLine is builtin.CommandLine: the command line of a run_command call.
func commandLine(arguments string) string { return builtin.CommandLine(arguments) }

// maxShownTurnText is how much of the model's text a pending item shows.
const maxShownTurnText = 4096

// committedTurn fills in a deferred approval's turn from its committed
// record: the model's text (redacted and cut as the live events show it)
// and the turn's calls with their committed statuses.
func (s *Server) committedTurn(v *PendingView, recs []*messages.TurnRecord) {
	for _, rec := range recs {
		if rec.GetTurn() != v.Turn { // turn numbers are the session's
			continue
		}
		v.TurnText = s.opts.Dispatcher.ShownText(strings.TrimSpace(rec.GetAssistant().GetContent()), maxShownTurnText)
		for _, m := range rec.GetToolMessages() {
			this := m.GetToolCallId() == v.CallID
			v.Calls = append(v.Calls, TurnCallView{CallID: m.GetToolCallId(), Tool: m.GetName(),
				Status: m.GetStatus(), Words: statusText(m.GetStatus()), This: this})
		}
		return
	}
}
