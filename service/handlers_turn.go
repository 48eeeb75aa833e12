package service

import (
	"cmp"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// maxIDLen is the longest session, run or turn id the dispatcher takes.
const maxIDLen = 256

// Names of the last event of a streamed turn.
const (
	eventResult = "result" // data: the turn's reply
	eventError  = "error"  // data: {"error","code",…}
)

// dispatched is what Dispatch returned.
type dispatched struct {
	res *messages.TurnResult
	err error
}

// handleTurn serves POST /v1/sessions/{session}/turns: it dispatches one
// turn and answers with its result, or streams its events first when the
// client accepts text/event-stream. The request's context is the turn's:
// a client that goes away cancels the turn, whose results are still
// committed. Turns of one session run one at a time, in the order they
// reach the session's actor (the dispatcher's rule, not the service's).
func (s *Server) handleTurn(w http.ResponseWriter, r *http.Request) {
	if s.shuttingDown() {
		s.refuseShuttingDown(w, r)
		return
	}
	if !s.admitSpace(w, r) {
		return
	}
	r = withTraceContext(r)
	var req turnRequest
	if e := decodeJSON(w, r, s.opts.MaxBodyBytes, &req); e != nil {
		writeError(w, e)
		return
	}
	p, key, decl, shape, e := s.turnFromRequest(r.PathValue("session"), &req)
	if e != nil {
		writeError(w, e)
		return
	}
	if p.ApproveLowered() {
		// Said at once, before the turn waits for anything: the headers
		// go out with the stream's start or with the reply.
		w.Header().Set(ApproveLoweredHeader, p.ApproveAsked()+"->"+p.Approve())
	}
	s.runs.Put(key, decl)
	if wantsEventStream(r) {
		s.streamTurn(w, r, p, shape)
		return
	}
	res, err := s.opts.Dispatcher.DispatchPrepared(r.Context(), p)
	code, body := s.turnOutcome(p.Turn(), res, err, shape)
	s.answered(p.Turn(), res, code, body)
	writeTurnOutcome(w, code, body)
}

// answered tells Options.TurnAnswered what the client of dt is answered.
func (s *Server) answered(dt *messages.DispatchTurn, res *messages.TurnResult, code int, body any) {
	if s.opts.TurnAnswered == nil {
		return
	}
	var summary string
	if f, ok := body.(turnFailure); ok {
		summary = f.Error
	} else {
		var b strings.Builder
		for i, m := range res.GetMessages() {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(m.GetToolCallId() + "=" + m.GetStatus())
		}
		summary = b.String()
	}
	s.opts.TurnAnswered(dt.GetSession(), res.GetTurn(), code, summary)
}

// errTakenOver is the error of a turn whose writes the store refused
// because another writer took the session over while it ran.
const errTakenOver = "the session was taken over by another writer (a grain on another member) while this turn ran; " +
	"nothing of it was committed here: send the turn again with its turn_id, which replays what the session holds of it " +
	"(calls that may have started read outcome_unknown)"

// drainRetryAfter is the Retry-After (seconds) of a 503 from a member that
// shuts down or left the cluster: the session's next owner serves it within
// about a second (docs/CLUSTER.md's failover figures).
const drainRetryAfter = "1"

// writeTurnOutcome writes what turnOutcome chose.
func writeTurnOutcome(w http.ResponseWriter, code int, body any) {
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", drainRetryAfter)
	}
	writeJSON(w, code, body)
}

// streamTurn dispatches a turn and streams its events, then a result (or
// error) event. It subscribes to the events of this request only (their
// request id), so other turns of the session, running or queued, never
// reach its stream. The result carries the messages in shape.
func (s *Server) streamTurn(w http.ResponseWriter, r *http.Request, p *actors.Prepared, shape messages.Shape) {
	dt := p.Turn()
	ch, cancel := s.opts.Broker.subscribeRequest(dt.Session, p.RequestID(), 0)
	defer func() { cancel() }()
	st := startSSE(w)
	defer st.finish()

	done := make(chan dispatched, 1)
	go func() {
		res, err := s.opts.Dispatcher.DispatchPrepared(r.Context(), p)
		done <- dispatched{res, err}
	}()
	tick := time.NewTicker(keepAliveInterval)
	defer tick.Stop()

	var last uint64
	// forward writes one event; after a lagged notice it resubscribes from
	// the session's ring. Write errors are ignored: the turn goes on (the
	// request's context cancels it) and must be waited for.
	forward := func(ev *messages.Event) {
		if ev.GetKind() == EventLagged {
			cancel()
			ch, cancel = s.opts.Broker.subscribeRequest(dt.Session, p.RequestID(), last)
			return
		}
		_ = st.event(ev)
		last = ev.GetSeq()
	}
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				ch = nil
				continue
			}
			forward(ev)
		case out := <-done:
			// The turn's events were all published before Dispatch returned.
			for drained := false; !drained; {
				select {
				case ev, ok := <-ch:
					if !ok {
						drained = true
					} else {
						forward(ev)
					}
				default:
					drained = true
				}
			}
			code, body := s.turnOutcome(dt, out.res, out.err, shape)
			s.answered(dt, out.res, code, body)
			kind := eventResult
			if code != http.StatusOK {
				kind = eventError
				if f, ok := body.(turnFailure); ok {
					f.Code = code
					body = f
				}
			}
			_ = st.send("", kind, body)
			return
		case <-tick.C:
			_ = st.comment("keep-alive")
		}
	}
}

// turnOutcome maps what Dispatch returned to a status code and a body
// whose messages are in shape.
func (s *Server) turnOutcome(dt *messages.DispatchTurn, res *messages.TurnResult, err error, shape messages.Shape) (int, any) {
	switch {
	case err == nil:
		return http.StatusOK, turnReplyOf[any]{Turn: res.GetTurn(), Messages: messages.ReplyTo(dt.GetMessage(), res.GetMessages(), shape), Replayed: res.GetReplayed(), Member: res.GetMember()}
	case errors.Is(err, actors.ErrClosed):
		return http.StatusServiceUnavailable, turnFailure{Error: errShuttingDown().msg}
	case errors.Is(err, actors.ErrBadRequest):
		return http.StatusBadRequest, turnFailure{Error: err.Error()}
	case errors.Is(err, actors.ErrTurnIDConflict):
		return http.StatusConflict, turnFailure{Error: err.Error()}
	case errors.Is(err, actors.ErrMemberLeft):
		// Another member serves the session once it is taken over.
		return http.StatusServiceUnavailable, turnFailure{Error: actors.ErrMemberLeft.Error()}
	case errors.Is(err, actors.ErrNoHost):
		// The grain was not reached: the client sends the turn again.
		return http.StatusServiceUnavailable, turnFailure{Error: actors.ErrNoHost.Error()}
	case errors.Is(err, cachestore.ErrFenced):
		// Another member's grain took the session over while the turn
		// ran: it serves the session, and the turn sent again replays what
		// the store holds of it.
		return http.StatusServiceUnavailable, turnFailure{Error: errTakenOver, Turn: res.GetTurn()}
	case errors.Is(err, cachestore.ErrNoSpace):
		// The store refused a write of the turn for want of space.
		s.opts.Metrics.noSpace.Inc()
		s.log.Warn().Str("session", dt.GetSession()).Int64("turn", res.GetTurn()).Str("reason", res.GetError()).Msg("a turn failed for want of space")
		return http.StatusInsufficientStorage, turnFailure{Error: "the turn failed: " + res.GetError(), Turn: res.GetTurn()}
	}
	f := turnFailure{Error: "the turn failed", Turn: res.GetTurn()}
	if len(res.GetMessages()) > 0 {
		f.Messages = messages.ReplyTo(dt.GetMessage(), res.GetMessages(), shape)
	}
	if res.GetError() != "" {
		f.Error = "the turn failed: " + res.GetError()
	}
	code := http.StatusInternalServerError
	if s.shuttingDown() {
		code = http.StatusServiceUnavailable
	}
	s.log.Error().Err(err).Str("session", dt.GetSession()).Int64("turn", res.GetTurn()).Msg("dispatching a turn failed")
	return code, f
}

// turnFromRequest checks a turn request and builds and prepares the
// DispatchTurn, with the run's earlier declarations for what the request
// leaves out, and the shape its results go back in.
func (s *Server) turnFromRequest(session string, req *turnRequest) (*actors.Prepared, runKey, runDecl, messages.Shape, *apiError) {
	bad := func(format string, args ...any) (*actors.Prepared, runKey, runDecl, messages.Shape, *apiError) {
		return nil, runKey{}, runDecl{}, "", errorf(http.StatusBadRequest, format, args...)
	}
	switch {
	case len(session) > maxIDLen:
		return bad("the session id is longer than %d bytes", maxIDLen)
	case len(req.Run) > maxIDLen:
		return bad("run is longer than %d bytes", maxIDLen)
	case len(req.TurnID) > maxIDLen:
		return bad("turn_id is longer than %d bytes", maxIDLen)
	case len(req.Provider) > maxIDLen:
		return bad("provider is longer than %d bytes", maxIDLen)
	case len(req.Message) == 0 || string(req.Message) == "null":
		return bad("message is required: the assistant message whose tool_calls to run")
	}
	format, err := messages.ParseFormat(req.Format)
	if err != nil {
		return bad("%s", err.Error())
	}
	reply, err := messages.ParseReply(req.Reply)
	if err != nil {
		return bad("%s", err.Error())
	}
	switch req.Approve {
	case "", actors.ApproveAsk, actors.ApproveAll, actors.ApproveNone:
	default:
		return bad("approve must be \"ask\", \"all\" or \"none\", not %q", messages.ClipText(req.Approve, 40))
	}
	switch req.Confirm {
	case "", actors.ConfirmBlock, actors.ConfirmDefer:
	default:
		return bad("confirm must be \"block\" or \"defer\", not %q", messages.ClipText(req.Confirm, 40))
	}
	autoLoad := s.opts.AutoLoadSchemas
	if req.AutoLoadSchemas != nil {
		autoLoad = *req.AutoLoadSchemas
	}
	a, err := messages.DecodeAssistant(req.Message, "message.")
	if err != nil {
		return bad("invalid request: %s", err.Error())
	}
	msg, format, err := a.Convert(format, "message.")
	if err != nil {
		return bad("%s", err.Error())
	}
	var specs []*messages.ToolSpec
	if req.ClientTools != nil {
		if specs, err = messages.ToolSpecs(*req.ClientTools); err != nil {
			return bad("%s", err.Error())
		}
	}
	var exclude []string
	if req.Exclude != nil {
		exclude = *req.Exclude
	}
	key := runKey{Session: session, Run: cmp.Or(req.Run, defaultRun)}
	decl := s.runs.Merge(key, specs, req.ClientTools != nil, exclude, req.Exclude != nil)
	var policy string
	if len(req.Chaos) > 0 && string(req.Chaos) != "null" {
		policy = string(req.Chaos)
	}
	// A body that says nothing asks for the operator's approval.
	dt := &messages.DispatchTurn{
		Session: session, Run: req.Run, Provider: req.Provider, Message: msg,
		ClientTools: decl.ClientTools, Exclude: decl.Exclude,
		Approve: cmp.Or(req.Approve, s.opts.Approve), TurnId: req.TurnID, AutoLoadSchemas: autoLoad, Chaos: policy,
		ToolsFormat: cmp.Or(req.ToolsFormat, string(format)), Confirm: req.Confirm,
	}
	// The dispatcher checks the turn, settles its policy (the operator's
	// approve and exclude are a ceiling the body may narrow, never widen)
	// and builds its tools view and chaos policy once, before the response
	// starts: what it refuses is a 400.
	p, err := s.opts.Dispatcher.PrepareWith(dt, s.policy())
	if err != nil {
		return bad("%s", err.Error())
	}
	return p, key, decl, messages.ReplyShape(format, reply), nil
}

// view builds the tools view of a run with its declarations, under the
// operator's policy.
func (s *Server) view(provider string, decl runDecl) (*toolkit.View, error) {
	return s.opts.Dispatcher.ToolsView(provider, decl.ClientTools, decl.Exclude, s.policy())
}

// policy is the operator's ceiling over turns (Options.Approve,
// Options.Exclude), which the dispatcher applies with its own.
func (s *Server) policy() actors.Policy {
	return actors.Policy{MaxApprove: s.opts.Approve, Exclude: s.opts.Exclude}
}

func errShuttingDown() *apiError {
	e := errorf(http.StatusServiceUnavailable, "the service is shutting down")
	e.retryAfter = drainRetryAfter
	return e
}
