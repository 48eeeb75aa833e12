package service

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Statuses of a confirmation's answer (messages.ConfirmAck).
const (
	ackAccepted        = "accepted"
	ackNotFound        = "not_found"
	ackMismatch        = "mismatch"
	ackAlreadyAnswered = "already_answered"
)

// statusReply is the body of an accepted answer, or of a refused one with
// its reason.
type statusReply struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// handleConfirm serves POST /v1/sessions/{session}/confirm/{call_id}. The
// answer is bound to the call id and to args_hash, the hash of the call's
// canonical arguments its tool_confirm event (and GET /v1/pending) carries:
// an answer without it is refused, one with another hash is a mismatch.
// A confirmation is answered once: another answer, while the broker
// remembers the decision, is already_answered.
func (s *Server) handleConfirm(w http.ResponseWriter, r *http.Request) {
	r = withTraceContext(r)
	session, callID := r.PathValue("session"), r.PathValue("call_id")
	var req confirmRequest
	if e := decodeJSON(w, r, s.answerBodyBytes(), &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Approve == nil {
		writeError(w, errorf(http.StatusBadRequest, `field "approve" is required: true or false`))
		return
	}
	if req.ArgsHash == "" {
		writeError(w, errorf(http.StatusBadRequest, `field "args_hash" is required: the args_hash of the call's tool_confirm event (GET /v1/pending shows it too)`))
		return
	}
	ack, err := s.opts.Dispatcher.Confirm(r.Context(), &messages.ConfirmReply{
		Session: session, CallId: callID, ArgsHash: req.ArgsHash, Approve: *req.Approve, Reason: messages.ClipText(req.Reason, 1000),
	})
	if err != nil {
		s.dispatcherError(w, "confirming a call", err)
		return
	}
	status := ack.GetStatus()
	if status == ackNotFound && s.opts.Broker.Decided(session, callID) {
		// The turn that asked has moved on; the decision is remembered.
		status = ackAlreadyAnswered
	}
	switch status {
	case ackAccepted:
		s.opts.Broker.ConfirmAnswered(session, callID)
		writeJSON(w, http.StatusOK, statusReply{Status: ackAccepted})
	case ackNotFound:
		writeJSON(w, http.StatusNotFound, statusReply{Status: ackNotFound, Error: "no pending confirmation of that call in this session"})
	case ackMismatch:
		writeJSON(w, http.StatusConflict, statusReply{Status: ackMismatch, Error: "args_hash does not match the arguments of the call waiting for confirmation"})
	case ackAlreadyAnswered:
		writeJSON(w, http.StatusConflict, statusReply{Status: ackAlreadyAnswered, Error: "the call's confirmation was already answered"})
	default:
		s.log.Error().Str("status", messages.ClipText(status, 40)).Msg("unexpected confirmation status")
		writeError(w, errorf(http.StatusInternalServerError, "the dispatcher gave an unexpected answer"))
	}
}

// noReplies is the answer of the reply endpoints when nothing takes
// replies.
var noReplies = &apiError{code: http.StatusNotFound, msg: "no pending question or client call with that id"}

// handleAnswer serves POST /v1/sessions/{session}/answer/{call_id}: the
// answer to an ask_user question, or the value of a store_secret question
// with, optionally, the origins kept of those asked about.
func (s *Server) handleAnswer(w http.ResponseWriter, r *http.Request) {
	r = withTraceContext(r)
	if s.opts.Replies == nil {
		writeError(w, noReplies)
		return
	}
	var req answerRequest
	if e := decodeJSON(w, r, s.answerBodyBytes(), &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Declined {
		dr, ok := s.opts.Replies.(DeclineReplies)
		if !ok {
			writeError(w, errorf(http.StatusBadRequest, `field "declined" is not supported by this server`))
			return
		}
		err := dr.Decline(r.Context(), r.PathValue("session"), r.PathValue("call_id"))
		s.writeReplyOutcome(w, "declining a question", err)
		return
	}
	if len(req.Content) > 0 {
		if req.Text != nil {
			writeError(w, errorf(http.StatusBadRequest, `give "text" or "content", not both`))
			return
		}
		if c := bytes.TrimSpace(req.Content); len(c) == 0 || c[0] != '{' {
			writeError(w, errorf(http.StatusBadRequest, `field "content" must be an object of the requested fields`))
			return
		}
		text := string(req.Content)
		req.Text = &text
	}
	if req.Text == nil {
		writeError(w, errorf(http.StatusBadRequest, `field "text" is required: the answer`))
		return
	}
	if len(req.Origins) > 0 {
		sr, ok := s.opts.Replies.(SecretReplies)
		if !ok {
			writeError(w, errorf(http.StatusBadRequest, `field "origins" is not supported by this server`))
			return
		}
		err := sr.AnswerSecret(r.Context(), r.PathValue("session"), r.PathValue("call_id"), *req.Text, req.Origins)
		s.writeReplyOutcome(w, "answering a question", err)
		return
	}
	err := s.opts.Replies.Answer(r.Context(), r.PathValue("session"), r.PathValue("call_id"), *req.Text)
	s.writeReplyOutcome(w, "answering a question", err)
}

// handleClientResult serves POST /v1/sessions/{session}/client_result/{call_id}:
// the result of a client tool's call.
func (s *Server) handleClientResult(w http.ResponseWriter, r *http.Request) {
	r = withTraceContext(r)
	if s.opts.Replies == nil {
		writeError(w, noReplies)
		return
	}
	var req clientResultRequest
	if e := decodeJSON(w, r, s.opts.MaxBodyBytes, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Content == nil {
		writeError(w, errorf(http.StatusBadRequest, `field "content" is required: the call's result text`))
		return
	}
	format, err := messages.ParseFormat(req.Format)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "%s", err.Error()))
		return
	}
	reply, err := messages.ParseReply(req.Reply)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "%s", err.Error()))
		return
	}
	session, callID := r.PathValue("session"), r.PathValue("call_id")
	err = s.opts.Replies.ClientResult(r.Context(), session, callID, *req.Content, req.IsError)
	if err != nil {
		s.writeReplyOutcome(w, "handing back a client result", err)
		return
	}
	out := clientResultReply{Status: ackAccepted}
	m, err := s.committedResult(r.Context(), session, callID)
	if err != nil {
		// The result is committed; only reading it back failed.
		s.log.Warn().Err(err).Str("session", session).Msg("reading a committed client result back")
	} else if m != nil {
		out.Message = messages.ResultJSON(m, messages.ReplyShape(format, reply))
	}
	writeJSON(w, http.StatusOK, out)
}

// committedResult reads back the tool message of a client call the store
// holds, nil when the store does not show it settled: the latest turn
// that has the call id wins.
func (s *Server) committedResult(ctx context.Context, session, callID string) (*messages.ToolMessage, error) {
	turns, err := s.opts.Store.Turns(ctx, session)
	if err != nil {
		return nil, err
	}
	for i := len(turns) - 1; i >= 0; i-- {
		for _, m := range turns[i].GetToolMessages() {
			if m.GetToolCallId() == callID && m.GetStatus() != string(toolkit.StatusClientPending) {
				return m, nil
			}
		}
	}
	return nil, nil
}

func (s *Server) writeReplyOutcome(w http.ResponseWriter, what string, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, statusReply{Status: ackAccepted})
	case errors.Is(err, actors.ErrNoPending):
		writeError(w, noReplies)
	case errors.Is(err, actors.ErrAlreadyAnswered):
		writeJSON(w, http.StatusConflict, statusReply{Status: ackAlreadyAnswered, Error: "already answered"})
	case errors.Is(err, actors.ErrInvalidAnswer):
		// The reason names the fields; the question still waits.
		writeError(w, errorf(http.StatusBadRequest, "%s", strings.TrimPrefix(err.Error(), "actors: ")))
	default:
		s.dispatcherError(w, what, err)
	}
}

// handleEndRun serves DELETE /v1/sessions/{session}/runs/{run}.
func (s *Server) handleEndRun(w http.ResponseWriter, r *http.Request) {
	session, run := r.PathValue("session"), r.PathValue("run")
	if err := s.opts.Dispatcher.EndRun(r.Context(), session, run); err != nil {
		s.dispatcherError(w, "ending a run", err)
		return
	}
	s.runs.Drop(runKey{Session: session, Run: run})
	w.WriteHeader(http.StatusNoContent)
}

// handleSession serves GET /v1/sessions/{session}: the persisted tool
// messages and tool histories.
func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	session := r.PathValue("session")
	turns, err := s.opts.Store.Turns(r.Context(), session)
	if err != nil {
		s.dispatcherError(w, "reading a session", err)
		return
	}
	if len(turns) == 0 {
		writeError(w, errorf(http.StatusNotFound, "session %q has no committed turns", messages.ClipText(session, 100)))
		return
	}
	writeJSON(w, http.StatusOK, sessionJSON(turns))
}

// handleSessions serves GET /v1/sessions: the ids of the persisted sessions
// and of those with recent events.
func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request) {
	ids, err := s.sessionIDs(r.Context())
	if err != nil {
		s.dispatcherError(w, "listing sessions", err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Sessions []string `json:"sessions"`
	}{ids})
}

// sessionIDs merges the store's sessions with the broker's, sorted.
func (s *Server) sessionIDs(ctx context.Context) ([]string, error) {
	stored, err := s.opts.Store.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	ids := slices.Concat(stored, s.opts.Broker.Sessions())
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// handleTools serves GET /v1/tools?provider=&session=&run=&format=: the
// tools array and the turn-context text a provider gets; with a session
// (and run), the run's declared client tools and exclusions apply. format
// (default openai) is the array's shape and schema subset; in the formats
// that convert schemas, the tools whose schema cannot be converted are
// listed as refused.
func (s *Server) handleTools(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	provider := cmp.Or(q.Get("provider"), "openai")
	format, err := toolkit.ParseToolsFormat(q.Get("format"))
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "%s", err.Error()))
		return
	}
	var decl runDecl
	if session := q.Get("session"); session != "" {
		decl = s.runs.Get(runKey{Session: session, Run: cmp.Or(q.Get("run"), defaultRun)})
	}
	view, err := s.view(provider, decl)
	if err != nil {
		s.log.Error().Err(err).Msg("building a tools view")
		writeError(w, errorf(http.StatusInternalServerError, "building the tools view failed"))
		return
	}
	tools, refused := view.ArrayIn(format)
	if format == toolkit.ToolsOpenAI {
		refused = nil
	}
	writeJSON(w, http.StatusOK, struct {
		Tools   any                   `json:"tools"`
		Context string                `json:"context"`
		Refused []toolkit.RefusedTool `json:"refused,omitempty"`
	}{tools, view.ContextText(), refused})
}

// nonNil returns an empty slice for nil, so JSON shows [] and not null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// handleHealth serves GET /healthz: ok; shutting_down; or degraded (503)
// while the store's disk is below its free-space reserve, saying why (the
// folder and the sizes only to a caller the token would admit).
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if s.shuttingDown() {
		writeJSON(w, http.StatusServiceUnavailable, statusReply{Status: "shutting_down"})
		return
	}
	if why := s.spaceHealth(s.opts.Token == "" || s.authorized(r)); why != "" {
		writeJSON(w, http.StatusServiceUnavailable, healthReply{Status: "degraded", Reason: why})
		return
	}
	writeJSON(w, http.StatusOK, statusReply{Status: "ok"})
}

// handleSessionEvents serves GET /v1/sessions/{session}/events.
func (s *Server) handleSessionEvents(w http.ResponseWriter, r *http.Request) {
	after, e := lastEventID(r)
	if e != nil {
		writeError(w, e)
		return
	}
	s.serveEvents(w, r, r.PathValue("session"), after)
}

// handleAllEvents serves GET /v1/events: every session's events, for the
// operator page.
func (s *Server) handleAllEvents(w http.ResponseWriter, r *http.Request) {
	s.serveEvents(w, r, "", 0)
}

// serveEvents streams a subscription until the client goes away, the
// subscriber lags behind, or the server shuts down.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request, session string, after uint64) {
	if !s.enterStream() {
		writeError(w, errShuttingDown())
		return
	}
	defer s.leaveStream()
	ch, cancel := s.opts.Broker.Subscribe(session, after)
	defer cancel()
	st := startSSE(w)
	defer st.finish()
	tick := time.NewTicker(keepAliveInterval)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok || st.event(ev) != nil || ev.GetKind() == EventLagged {
				return
			}
		case <-tick.C:
			if st.comment("keep-alive") != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.done:
			_ = st.comment("shutting down")
			return
		}
	}
}

// dispatcherError answers a failure of the dispatcher, the store or the
// reply sink.
func (s *Server) dispatcherError(w http.ResponseWriter, what string, err error) {
	switch {
	case errors.Is(err, actors.ErrClosed):
		writeError(w, errShuttingDown())
	case errors.Is(err, actors.ErrBadRequest):
		writeError(w, errorf(http.StatusBadRequest, "%s", err.Error()))
	case errors.Is(err, actors.ErrNoHost), errors.Is(err, actors.ErrMemberLeft):
		// The session's grain moves between members: ask again.
		e := errorf(http.StatusServiceUnavailable, "%s: %s", what, err.Error())
		e.retryAfter = drainRetryAfter
		writeError(w, e)
	case errors.Is(err, context.Canceled):
		// The client went away: nobody reads the answer.
		writeError(w, errorf(http.StatusServiceUnavailable, "%s was canceled", what))
	default:
		s.log.Error().Err(err).Msg(what + " failed")
		writeError(w, errorf(http.StatusInternalServerError, "%s failed", what))
	}
}
