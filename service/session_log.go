package service

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

// askUserTool is the interactive tool whose running calls wait for an
// answer from the API.
const askUserTool = "ask_user"

// storeSecretTool is the tool that asks for a secret value with a
// secret_request event; its arguments propose the origins.
const storeSecretTool = "store_secret"

// maxSummaryCalls bounds how many calls of one turn a summary keeps.
const maxSummaryCalls = 100

// Call states in a TurnSummary, before the call's status is known.
const (
	StateChecking = "checking" // pass 1: not decided yet
	StateConfirm  = "confirm"  // waits for a confirmation
	StateApproved = "approved" // its confirmation was approved; it runs in pass 2
	StateRunning  = "running"  // pass 2: running
	StateEnded    = "ended"    // ran; its result is being committed
	StateDecided  = "decided"  // pass 1 decided it; its result is being committed
	StateDone     = "done"     // committed: Status is final
)

// PendingConfirm is a tool_confirm that waits for an answer.
type PendingConfirm struct {
	Session   string    `json:"session"`
	Run       string    `json:"run"`
	Turn      int64     `json:"turn"`
	CallID    string    `json:"call_id"`
	Tool      string    `json:"tool"`
	Arguments string    `json:"arguments"`
	ArgsHash  string    `json:"args_hash"`
	Question  string    `json:"question"`
	Since     time.Time `json:"since"`
	// Diff and Note preview a call that changes workspace files: what it
	// would do to them as they were when it was asked (a unified diff, or
	// why there is none), and StateHash is the hash of the files' state
	// the approval is bound to. If the files are no longer so when the
	// call's turn to run comes, the approved call does not run.
	Diff      string `json:"diff,omitempty"`
	Note      string `json:"note,omitempty"`
	StateHash string `json:"state_hash,omitempty"`
	// TurnText is the model's own text of the turn (the reason it gave),
	// and Upcoming the turn's calls after this one, not checked yet: they
	// are checked, and asked if they need it, once this one is answered.
	TurnText string         `json:"turn_text,omitempty"`
	Upcoming []UpcomingCall `json:"upcoming,omitempty"`

	seq       uint64
	requestID string // of the turn that asked
}

// UpcomingCall is a call of a pending confirmation's turn that comes after
// it and is not checked yet.
type UpcomingCall struct {
	CallID    string `json:"call_id"`
	Tool      string `json:"tool"`
	Arguments string `json:"arguments,omitempty"`
	// Asks: if its checks pass, it will be asked next (its tool is not
	// read-only for these arguments).
	Asks bool `json:"asks"`
}

// PendingQuestion is a running ask_user or store_secret call that waits
// for an answer.
type PendingQuestion struct {
	Session  string    `json:"session"`
	Run      string    `json:"run"`
	Turn     int64     `json:"turn"`
	CallID   string    `json:"call_id"`
	Tool     string    `json:"tool"`
	Question string    `json:"question"`
	Since    time.Time `json:"since"`
	// Secret is the name of the secret asked for (store_secret): the
	// answer is its value, never shown.
	Secret string `json:"secret,omitempty"`
	// Origins are the origins the secret would be sent to, as proposed;
	// an answer may keep fewer ("origins" of the answer).
	Origins []string `json:"origins,omitempty"`
	// Schema is the JSON Schema an MCP server's request for input asks
	// the answer to match (an object of its fields; "declined" declines
	// it), and Note who asks and, for what looks like a request for a
	// secret, a warning.
	Schema json.RawMessage `json:"schema,omitempty"`
	Note   string          `json:"note,omitempty"`

	seq uint64
}

// Warns reports whether the note warns that the request looks like one for
// a secret (its "Warning:" sentence).
func (p PendingQuestion) Warns() bool { return strings.Contains(p.Note, "Warning:") }

// SchemaText is the requested schema indented, for the page.
func (p PendingQuestion) SchemaText() string {
	var b bytes.Buffer
	if json.Indent(&b, p.Schema, "", "  ") != nil {
		return string(p.Schema)
	}
	return b.String()
}

// TurnSummary is what the operator page shows of one turn.
type TurnSummary struct {
	Session string        `json:"session"`
	Run     string        `json:"run"`
	Turn    int64         `json:"turn"`
	Started time.Time     `json:"started"`
	Calls   []CallSummary `json:"calls"`
	// Omitted counts calls beyond the summary's bound.
	Omitted int `json:"omitted,omitempty"`
}

// CallSummary is one call of a TurnSummary.
type CallSummary struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// State is one of the State constants; Status is set once known.
	State  string `json:"state"`
	Status string `json:"status,omitempty"`
}

type pendingConfirm struct {
	PendingConfirm
	ev *messages.Event
}

type pendingQuestion struct {
	PendingQuestion
	ev *messages.Event
}

// sessionLog is the broker's state of one session; guarded by Broker.mu.
type sessionLog struct {
	id      string
	lastUse uint64

	ring      []*messages.Event // oldest first
	ringBytes int

	subs      map[*subscriber]struct{}
	pending   map[string]*pendingConfirm  // by call id
	questions map[string]*pendingQuestion // by call id
	askArgs   map[string]string           // arguments of ask_user calls not yet ended, by call id
	turns     []*TurnSummary              // oldest first

	decided      map[string]bool // call ids whose confirmation was settled
	decidedOrder []string        // the same, oldest first, at most maxDecided
}

func newSessionLog(id string) *sessionLog {
	return &sessionLog{
		id:        id,
		subs:      map[*subscriber]struct{}{},
		pending:   map[string]*pendingConfirm{},
		questions: map[string]*pendingQuestion{},
		askArgs:   map[string]string{},
		decided:   map[string]bool{},
	}
}

// busy reports whether the session may not be forgotten.
func (s *sessionLog) busy() bool {
	return len(s.subs) > 0 || len(s.pending) > 0 || len(s.questions) > 0 || len(s.askArgs) > 0
}

// remember appends ev to the replay ring, dropping the oldest events beyond
// the bounds.
func (s *sessionLog) remember(ev *messages.Event, o BrokerOptions) {
	s.ring = append(s.ring, ev)
	s.ringBytes += eventSize(ev)
	drop := 0
	for len(s.ring)-drop > 1 && (len(s.ring)-drop > o.ReplayEvents || s.ringBytes > o.ReplayBytes) {
		s.ringBytes -= eventSize(s.ring[drop])
		s.ring[drop] = nil
		drop++
	}
	if drop > 0 {
		s.ring = s.ring[drop:]
	}
	if cap(s.ring) > 2*o.ReplayEvents {
		s.ring = append([]*messages.Event(nil), s.ring...)
	}
}

func eventSize(ev *messages.Event) int {
	return 128 + len(ev.GetText()) + len(ev.GetArguments())
}

// since returns the recorded events after seq.
func (s *sessionLog) since(seq uint64) []*messages.Event {
	var out []*messages.Event
	for _, ev := range s.ring {
		if ev.GetSeq() > seq {
			out = append(out, ev)
		}
	}
	return out
}

// pendingEvents returns the events that asked what is still pending, after
// seq, in sequence order.
func (s *sessionLog) pendingEvents(seq uint64) []*messages.Event {
	var out []*messages.Event
	for _, p := range s.pending {
		if p.ev.GetSeq() > seq {
			out = append(out, p.ev)
		}
	}
	for _, q := range s.questions {
		if q.ev.GetSeq() > seq {
			out = append(out, q.ev)
		}
	}
	return mergeBySeq(nil, out)
}

// track updates the pending confirmations and questions and the turn
// summaries with one event.
func (s *sessionLog) track(ev *messages.Event, recentTurns int) {
	since := eventTime(ev)
	c := s.call(ev, since, recentTurns)
	switch ev.GetKind() {
	case actors.EventToolCall:
		if ev.GetTool() == askUserTool || ev.GetTool() == storeSecretTool {
			s.askArgs[ev.GetCallId()] = ev.GetArguments()
		}
		setState(c, StateChecking, "")
	case toolkit.QuestionElicit:
		if ev.GetStatus() == actors.ElicitDeclined {
			break // declined at once: nobody can answer it
		}
		pq := &pendingQuestion{ev: ev, PendingQuestion: PendingQuestion{
			Session: ev.GetSession(), Run: ev.GetRun(), Turn: ev.GetTurn(), CallID: ev.GetCallId(),
			Tool: ev.GetTool(), Question: ev.GetText(), Since: since, seq: ev.GetSeq(), Note: ev.GetNote(),
		}}
		if json.Valid([]byte(ev.GetArguments())) {
			pq.Schema = json.RawMessage(ev.GetArguments())
		}
		s.questions[ev.GetCallId()] = pq
	case toolkit.QuestionSecret:
		s.questions[ev.GetCallId()] = &pendingQuestion{ev: ev, PendingQuestion: PendingQuestion{
			Session: ev.GetSession(), Run: ev.GetRun(), Turn: ev.GetTurn(), CallID: ev.GetCallId(),
			Tool: ev.GetTool(), Question: ev.GetText(), Since: since, seq: ev.GetSeq(),
			Secret: ev.GetArguments(), Origins: proposedOrigins(s.askArgs[ev.GetCallId()]),
		}}
	case actors.EventToolConfirm:
		if ev.GetStatus() == string(toolkit.StatusAwaitingApproval) {
			// A deferred approval: the store keeps it (pendingViews),
			// not this member's memory.
			break
		}
		s.pending[ev.GetCallId()] = &pendingConfirm{ev: ev, PendingConfirm: PendingConfirm{
			Session: ev.GetSession(), Run: ev.GetRun(), Turn: ev.GetTurn(), CallID: ev.GetCallId(),
			Tool: ev.GetTool(), Arguments: ev.GetArguments(), ArgsHash: ev.GetArgsHash(),
			Question: ev.GetText(), Since: since, seq: ev.GetSeq(),
			Diff: ev.GetDiff(), Note: ev.GetNote(), StateHash: ev.GetStateHash(), requestID: ev.GetRequestId(),
			TurnText: ev.GetTurnText(), Upcoming: upcomingCalls(ev.GetUpcoming()),
		}}
		setState(c, StateConfirm, "")
	case EventConfirmDecided:
		s.unpend(ev)
		if ev.GetStatus() == actors.ConfirmApproved {
			setState(c, StateApproved, "")
		}
	case actors.EventToolCallStart:
		s.unpend(ev)
		if ev.GetTool() == askUserTool {
			s.questions[ev.GetCallId()] = &pendingQuestion{ev: ev, PendingQuestion: PendingQuestion{
				Session: ev.GetSession(), Run: ev.GetRun(), Turn: ev.GetTurn(), CallID: ev.GetCallId(),
				Tool: ev.GetTool(), Question: questionText(s.askArgs[ev.GetCallId()]), Since: since, seq: ev.GetSeq(),
			}}
		}
		setState(c, StateRunning, "")
	case actors.EventToolSkipped, actors.EventToolDeduped, actors.EventSchemaReturned:
		s.unpend(ev)
		setState(c, StateDecided, decidedStatus[ev.GetKind()])
	case actors.EventToolCallEnd:
		s.unask(ev)
		setState(c, StateEnded, ev.GetStatus())
	case actors.EventToolResult:
		s.unpend(ev)
		s.unask(ev)
		setState(c, StateDone, ev.GetStatus())
	}
}

// unpend settles the call's pending confirmation of the event's turn, if
// there is one.
func (s *sessionLog) unpend(ev *messages.Event) {
	if p, ok := s.pending[ev.GetCallId()]; ok && p.Turn == ev.GetTurn() {
		s.settle(p)
	}
}

// settle removes a pending confirmation and remembers it as decided.
func (s *sessionLog) settle(p *pendingConfirm) {
	delete(s.pending, p.CallID)
	if s.decided[p.CallID] {
		return
	}
	s.decided[p.CallID] = true
	s.decidedOrder = append(s.decidedOrder, p.CallID)
	if len(s.decidedOrder) > maxDecided {
		delete(s.decided, s.decidedOrder[0])
		s.decidedOrder = slices.Delete(s.decidedOrder, 0, 1)
	}
}

// unask removes the call's pending question.
func (s *sessionLog) unask(ev *messages.Event) {
	if q, ok := s.questions[ev.GetCallId()]; ok && q.Turn == ev.GetTurn() {
		delete(s.questions, ev.GetCallId())
	}
	delete(s.askArgs, ev.GetCallId())
}

// call returns the summary of the event's call, creating the turn and the
// call as needed; nil for events without a call or beyond the bound.
func (s *sessionLog) call(ev *messages.Event, since time.Time, recentTurns int) *CallSummary {
	if ev.GetCallId() == "" {
		return nil
	}
	var t *TurnSummary
	for i := len(s.turns) - 1; i >= 0; i-- {
		if s.turns[i].Turn == ev.GetTurn() {
			t = s.turns[i]
			break
		}
	}
	if t == nil {
		t = &TurnSummary{Session: ev.GetSession(), Run: ev.GetRun(), Turn: ev.GetTurn(), Started: since}
		s.turns = append(s.turns, t)
		if len(s.turns) > recentTurns {
			s.turns[0] = nil
			s.turns = s.turns[1:]
		}
	}
	// Results come in call order, so the call is usually near the end.
	for i := len(t.Calls) - 1; i >= 0; i-- {
		if t.Calls[i].CallID == ev.GetCallId() {
			return &t.Calls[i]
		}
	}
	if ev.GetKind() != actors.EventToolCall {
		return nil
	}
	if len(t.Calls) >= maxSummaryCalls {
		t.Omitted++
		return nil
	}
	t.Calls = append(t.Calls, CallSummary{CallID: ev.GetCallId(), Tool: ev.GetTool()})
	return &t.Calls[len(t.Calls)-1]
}

func setState(c *CallSummary, state, status string) {
	if c == nil || c.State == StateDone {
		return
	}
	c.State = state
	if status != "" {
		c.Status = status
	}
}

// eventTime is the event's stamp, or now when it has none.
func eventTime(ev *messages.Event) time.Time {
	if ns := ev.GetTimeUnixNano(); ns != 0 {
		return time.Unix(0, ns).UTC()
	}
	return time.Now().UTC()
}

// proposedOrigins takes the origins out of store_secret's arguments,
// normalised as store_secret does; none when they do not parse (the tool
// refuses such a call before asking).
func proposedOrigins(args string) []string {
	var a struct {
		Origins []string `json:"origins"`
	}
	if json.Unmarshal([]byte(args), &a) != nil {
		return nil
	}
	out, err := secrets.ParseOrigins(a.Origins)
	if err != nil {
		return nil
	}
	return out
}

// questionText takes the question out of ask_user's arguments; arguments
// of another shape are shown as they are.
func questionText(args string) string {
	var a struct {
		Question string `json:"question"`
	}
	if json.Unmarshal([]byte(args), &a) == nil && a.Question != "" {
		return a.Question
	}
	return args
}

// decidedStatus is the status a call that pass 1 decided will have, by
// the event that said so.
var decidedStatus = map[string]string{
	actors.EventToolSkipped:    string(toolkit.StatusSkipped),
	actors.EventToolDeduped:    string(toolkit.StatusDeduped),
	actors.EventSchemaReturned: string(toolkit.StatusSchemaReturned),
}

// Shown is what the page shows of the call: its status once known, else
// its state.
func (c CallSummary) Shown() string {
	if c.Status != "" && (c.State == StateDone || c.State == StateDecided || c.State == StateEnded) {
		return c.Status
	}
	return c.State
}

// upcomingCalls converts a tool_confirm's upcoming calls.
func upcomingCalls(us []*messages.UpcomingCall) []UpcomingCall {
	if len(us) == 0 {
		return nil
	}
	out := make([]UpcomingCall, len(us))
	for i, u := range us {
		out[i] = UpcomingCall{CallID: u.GetCallId(), Tool: u.GetTool(), Arguments: u.GetArguments(), Asks: u.GetAsks()}
	}
	return out
}
