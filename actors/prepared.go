package actors

import (
	"cmp"
	"fmt"
	"sync/atomic"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
)

// defaultProvider is the provider of a turn that names none.
const defaultProvider = "openai"

// Prepared is one turn request, checked and made ready to run: the
// request as it goes to the session (its request id set, its approve and
// exclude settled by the policy), the run's tools view (client tools'
// schemas compiled), the chaos policy, and each call's id, name and
// arguments as rules 1 and 2 of pass 1 read them (parsed once, under
// Config.Limits). Built by Dispatcher.Prepare from the caller's turn, or,
// for a turn that reaches a session from another member, once when it
// arrives there.
//
// In this process the Prepared itself is the message that carries the
// turn to its session's actors: nothing is looked up on the way. A
// Prepared is one request: it is dispatched once, by the dispatcher that
// prepared it. Its fields are immutable once it is dispatched.
type Prepared struct {
	d    *Dispatcher            // nil: prepared on arrival
	seq  uint64                 // the dispatcher's number of the request
	turn *messages.DispatchTurn // the request (the caller's message is not changed)
	view *toolkit.View
	// chaos is the turn's chaos policy, or the dispatcher's; nil: none.
	chaos *chaos.Policy
	calls []preparedCall
	// callsHash identifies the calls for the turn id (empty without one).
	callsHash string
	// lowered: a ceiling made the turn's approve lower than it asked.
	lowered bool
	sent    atomic.Bool
}

// preparedCall is one call as rules 1 and 2 of pass 1 read it.
type preparedCall struct {
	id   string // trimmed; made up by messages.CallIDs when missing
	name string // toolkit.NormaliseName of the name the model wrote
	// args are the parsed arguments, and err why they do not parse;
	// neither is set for a call beyond Config.MaxCallsPerTurn.
	args toolkit.Args
	err  error
}

// Turn is the request as it is sent: the caller's turn with its request id
// set and its approve and exclude as the policy settled them.
func (p *Prepared) Turn() *messages.DispatchTurn { return p.turn }

// RequestID names the request: every event of its turn carries it
// (messages.Event.request_id), so a caller can follow one request's
// events among those of its session.
func (p *Prepared) RequestID() string { return p.turn.GetRequestId() }

// Approve is the approval the turn gets under the policy: ask, all or none.
func (p *Prepared) Approve() string { return p.turn.GetApprove() }

// ApproveLowered reports whether a ceiling of the policy lowered the
// approval the turn asked for (all to ask, or ask or all to none): the
// turn gets Approve, less than it asked. A turn prepared on arrival from
// another member was settled there, and reports false.
func (p *Prepared) ApproveLowered() bool { return p.lowered }

// ApproveAsked is the approval the turn asked for when a ceiling lowered
// it (ApproveLowered), else "".
func (p *Prepared) ApproveAsked() string { return p.turn.GetApproveAsked() }

// prepare checks t and builds its Prepared under the dispatcher's policy
// and narrow; requestID, when set, names the request (a turn from
// elsewhere keeps its own). Errors wrap ErrBadRequest; a client tool named
// like a built-in of the provider's tools array also wraps
// toolkit.ErrToolCollision.
func prepare(cfg *shared, t *messages.DispatchTurn, narrow Policy, requestID string) (*Prepared, error) {
	if err := checkTurn(t, cfg.MaxTurnBytes); err != nil {
		return nil, err
	}
	if err := narrow.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	policy, err := chaos.Parse(t.Chaos)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if policy == nil {
		policy = cfg.Chaos
	}
	format, err := toolkit.ParseToolsFormat(t.ToolsFormat)
	if err != nil {
		return nil, fmt.Errorf("%w: tools_format: %w", ErrBadRequest, err)
	}
	confirm := cmp.Or(t.Confirm, cfg.Confirm, ConfirmBlock)
	if confirm != ConfirmBlock && confirm != ConfirmDefer {
		return nil, fmt.Errorf("%w: confirm must be block or defer", ErrBadRequest)
	}
	approve, exclude, lowered := cfg.settle(narrow, t)
	view, err := cfg.view(t.Provider, t.ClientTools, exclude)
	if err != nil {
		return nil, fmt.Errorf("%w: client_tools: %w", ErrBadRequest, err)
	}
	req := copyTurn(t)
	if requestID != "" {
		req.RequestId = requestID
	}
	// What the turn asked for travels with it when a ceiling lowered it,
	// so a member it is forwarded to (which settles it again and finds
	// nothing lower) still says so.
	asked := cmp.Or(t.GetApproveAsked(), t.GetApprove())
	lowered = lowered || approvalLowered(asked, approve)
	req.ApproveAsked = ""
	if lowered {
		req.ApproveAsked = asked
	}
	req.Approve, req.Exclude, req.Confirm = approve, exclude, confirm
	p := &Prepared{turn: req, view: view.WithFormat(format), chaos: policy, lowered: lowered}
	p.calls = parseCalls(t.Message.GetToolCalls(), cfg.MaxCallsPerTurn, cfg.Limits)
	if t.TurnId != "" {
		p.callsHash = callsHash(t.Message.GetToolCalls(), p.calls)
	}
	return p, nil
}

// view builds the tools view of a run: the provider's array policy, the
// run's client tools, and every tool in exclude left out.
func (cfg *shared) view(provider string, clientTools []*messages.ToolSpec, exclude []string) (*toolkit.View, error) {
	var client []*toolkit.Tool
	for _, s := range clientTools {
		client = append(client, toolkit.ClientToolFromSpec(s.GetName(), s.GetDescription(), s.GetParameters()))
	}
	return toolkit.NewView(cfg.Registry, cmp.Or(provider, defaultProvider), client, exclude)
}

// parseCalls reads each call's id, name and, for the first max calls, its
// arguments (rules 1 and 2 of pass 1, the part that needs no run state).
func parseCalls(calls []*messages.ToolCall, max int, lim toolkit.Limits) []preparedCall {
	ids := messages.CallIDs(calls)
	out := make([]preparedCall, len(calls))
	for i, tc := range calls {
		c := &out[i]
		c.id, c.name = ids[i], toolkit.NormaliseName(tc.GetFunction().GetName())
		if i < max {
			c.args, c.err = toolkit.ParseArgs(tc.GetFunction().GetArguments(), lim)
		}
	}
	return out
}

// copyTurn returns a shallow copy of t (fields shared, read-only): the
// caller's message is not changed, and a turn of 64 MiB of arguments is
// not copied.
func copyTurn(t *messages.DispatchTurn) *messages.DispatchTurn {
	c := &messages.DispatchTurn{}
	dst := c.ProtoReflect()
	t.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	return c
}
