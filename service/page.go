package service

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
)

// Bounds of the operator page's first rendering.
const (
	// pageSessions is how many sessions the page lists: those with recent
	// events first, then persisted ones.
	pageSessions = 50
	// pageStoredTurns is how many persisted turns a session shows when the
	// broker has none of its recent turns.
	pageStoredTurns = 5
)

//go:embed page.html page.js page.css login.html
var pageFiles embed.FS

// staticTypes are the page's assets and their content types.
var staticTypes = map[string]string{
	"page.js":  "text/javascript; charset=utf-8",
	"page.css": "text/css; charset=utf-8",
}

// pageData is what page.html renders.
type pageData struct {
	Sessions  []pageSession
	Confirms  []pageConfirm
	Questions []PendingQuestion
	// NextCursor, when set, is where page.js reads more of the pending
	// list from (GET /v1/pending?cursor=…).
	NextCursor string
	// StatusWords is statusWords as JSON, for page.js.
	StatusWords string
}

// pageConfirm is a pending confirmation with its turn, as the page shows
// it: the model's text, the turn's calls (this one marked) and, for a
// running turn, the calls that will ask after it.
type pageConfirm struct {
	PendingView
	TurnText     string
	Calls        []TurnCallView
	CallsOmitted int
	Next         []NextView
}

// pagePending is how many pending confirmations the page shows at first;
// it reads more as asked.
const pagePending = defaultPendingLimit

// pageConfirms joins the page's confirmations with their turns.
func pageConfirms(r *pendingReply) []pageConfirm {
	out := make([]pageConfirm, 0, len(r.Confirmations))
	for _, v := range r.Confirmations {
		c := pageConfirm{PendingView: v}
		for _, t := range r.Turns {
			if t.Session != v.Session || t.Turn != v.Turn {
				continue
			}
			c.TurnText, c.CallsOmitted = t.Text, t.CallsOmitted
			for _, tc := range t.Calls {
				tc.This = tc.CallID == v.CallID
				c.Calls = append(c.Calls, tc)
			}
			if t.Asking == v.CallID {
				c.Next = t.Next
			}
		}
		out = append(out, c)
	}
	return out
}

type pageSession struct {
	ID    string
	Turns []pageTurn
}

// statusCount is how many calls of a turn have one status.
type statusCount struct {
	Status string
	N      int
}

// LastTurn is the session's most recent turn, or nil.
func (s pageSession) LastTurn() *pageTurn {
	if len(s.Turns) == 0 {
		return nil
	}
	return &s.Turns[len(s.Turns)-1]
}

// Counts counts the turn's calls per status, in order of first appearance.
func (t pageTurn) Counts() []statusCount {
	var out []statusCount
	for _, c := range t.Calls {
		i := slices.IndexFunc(out, func(sc statusCount) bool { return sc.Status == c.Status })
		if i < 0 {
			out = append(out, statusCount{Status: c.Status})
			i = len(out) - 1
		}
		out[i].N++
	}
	return out
}

type pageTurn struct {
	Turn    int64
	Run     string
	Started string
	Calls   []pageCall
	Omitted int
}

type pageCall struct {
	CallID string
	Tool   string
	// Status is the final status once committed, else the call's state.
	Status string
}

// parsePage parses the template of the page called name (page.html,
// login.html).
func parsePage(name string) (*template.Template, error) {
	t, err := template.New(name).Funcs(template.FuncMap{"words": statusText}).ParseFS(pageFiles, name)
	if err != nil {
		return nil, fmt.Errorf("service: parsing %s: %w", name, err)
	}
	return t, nil
}

// handlePage serves the operator page at /: the sessions, their recent
// turns and what waits for an answer, rendered on the server; page.js keeps
// it up to date from GET /v1/events.
func (s *Server) handlePage(w http.ResponseWriter, r *http.Request) {
	data, err := s.pageData(r.Context())
	if err != nil {
		s.dispatcherError(w, "rendering the page", err)
		return
	}
	s.writeHTML(w, s.page, data, http.StatusOK)
}

// writeHTML renders t with data as the HTML response, with code. Headers
// set before it (a page's own Content-Security-Policy) are kept.
func (s *Server) writeHTML(w http.ResponseWriter, t *template.Template, data any, code int) {
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		s.log.Error().Err(err).Str("page", t.Name()).Msg("rendering a page")
		writeError(w, errorf(http.StatusInternalServerError, "rendering the page failed"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = b.WriteTo(w) // a write error means the client went away
}

// handleStatic serves the page's script and style sheet.
func (s *Server) handleStatic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	ct, ok := staticTypes[name]
	if !ok {
		writeError(w, errorf(http.StatusNotFound, "no such file"))
		return
	}
	b, err := pageFiles.ReadFile(name)
	if err != nil {
		writeError(w, errorf(http.StatusNotFound, "no such file"))
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b) // a write error means the client went away
}

// pageData gathers the page's first state.
func (s *Server) pageData(ctx context.Context) (*pageData, error) {
	b := s.opts.Broker
	pending, err := s.pendingPage(ctx, &pendingQuery{q: cachestore.WaitingQuery{Limit: pagePending, MaxBytes: pendingPageBytes},
		turns: true, first: true, filters: filtersID(url.Values{})})
	if err != nil {
		return nil, err
	}
	data := &pageData{Confirms: pageConfirms(pending), Questions: pending.Questions, NextCursor: pending.NextCursor,
		StatusWords: statusWordsJSON()}
	live := b.Sessions()
	ids := slices.Clone(live)
	if len(ids) < pageSessions {
		stored, err := s.opts.Store.Sessions(ctx)
		if err != nil {
			return nil, err
		}
		for _, id := range stored {
			if len(ids) >= pageSessions {
				break
			}
			if !slices.Contains(live, id) {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) > pageSessions {
		ids = ids[:pageSessions]
	}
	for _, id := range ids {
		ps := pageSession{ID: id}
		if recent := b.Recent(id); len(recent) > 0 {
			for _, t := range recent {
				ps.Turns = append(ps.Turns, pageTurnFromSummary(t))
			}
		} else {
			turns, err := s.opts.Store.Turns(ctx, id)
			if err != nil {
				return nil, err
			}
			for _, t := range turns[max(0, len(turns)-pageStoredTurns):] {
				ps.Turns = append(ps.Turns, pageTurnFromRecord(t))
			}
		}
		data.Sessions = append(data.Sessions, ps)
	}
	return data, nil
}

func pageTurnFromSummary(t TurnSummary) pageTurn {
	pt := pageTurn{Turn: t.Turn, Run: t.Run, Started: t.Started.Format(time.RFC3339), Omitted: t.Omitted}
	for _, c := range t.Calls {
		pt.Calls = append(pt.Calls, pageCall{CallID: c.CallID, Tool: c.Tool, Status: c.Shown()})
	}
	return pt
}

func pageTurnFromRecord(t *messages.TurnRecord) pageTurn {
	pt := pageTurn{Turn: t.GetTurn(), Run: t.GetRun(), Started: time.Unix(0, t.GetTimeUnixNano()).UTC().Format(time.RFC3339)}
	for _, m := range t.GetToolMessages() {
		pt.Calls = append(pt.Calls, pageCall{CallID: m.GetToolCallId(), Tool: m.GetName(), Status: m.GetStatus()})
	}
	return pt
}
