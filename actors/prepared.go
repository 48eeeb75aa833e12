package actors

import (
	"cmp"
	"fmt"
	"sync"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/chaos"
)

// defaultProvider is the provider of a turn that names none.
const defaultProvider = "openai"

// Prepared is a turn Dispatcher.Prepare accepted, with what its turn actor
// needs that is built from the request alone: the run's tools view (client
// tools' schemas compiled) and the chaos policy. Immutable; it may be
// dispatched more than once, by the dispatcher that prepared it.
type Prepared struct {
	d      *Dispatcher
	turn   *messages.DispatchTurn
	view   *toolkit.View
	policy *chaos.Policy
}

// Turn is the prepared request.
func (p *Prepared) Turn() *messages.DispatchTurn { return p.turn }

// prepare checks t and builds its view and chaos policy. Errors wrap
// ErrBadRequest; a client tool named like a built-in of the provider's
// tools array also wraps toolkit.ErrToolCollision.
func prepare(cfg *Config, t *messages.DispatchTurn) (*Prepared, error) {
	if err := checkTurn(t, cfg.MaxTurnBytes); err != nil {
		return nil, err
	}
	policy, err := chaos.Parse(t.Chaos)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if policy == nil {
		policy = cfg.Chaos
	}
	var client []*toolkit.Tool
	for _, s := range t.ClientTools {
		client = append(client, toolkit.ClientToolFromSpec(s.GetName(), s.GetDescription(), s.GetParameters()))
	}
	format, err := toolkit.ParseToolsFormat(t.ToolsFormat)
	if err != nil {
		return nil, fmt.Errorf("%w: tools_format: %w", ErrBadRequest, err)
	}
	view, err := toolkit.NewView(cfg.Registry, cmp.Or(t.Provider, defaultProvider), client, cfg.exclude(t.Exclude))
	if err != nil {
		return nil, fmt.Errorf("%w: client_tools: %w", ErrBadRequest, err)
	}
	return &Prepared{turn: t, view: view.WithFormat(format), policy: policy}, nil
}

// preparedTurns hands what Dispatch prepared to the turn actor of the same
// request, in this process: the session protocol carries only the
// *messages.DispatchTurn, and the turn actor looks it up by that message.
// A turn that arrives without one (from another cluster member, or sent to
// the dispatcher actor directly) is prepared by its turn actor.
type preparedTurns struct {
	m sync.Map // *messages.DispatchTurn -> *Prepared
}

func (p *preparedTurns) put(t *messages.DispatchTurn, pt *Prepared) {
	if p != nil {
		p.m.Store(t, pt)
	}
}

// take returns and forgets what was prepared for t, nil when nothing was.
func (p *preparedTurns) take(t *messages.DispatchTurn) *Prepared {
	if p == nil {
		return nil
	}
	v, ok := p.m.LoadAndDelete(t)
	if !ok {
		return nil
	}
	return v.(*Prepared)
}

func (p *preparedTurns) drop(t *messages.DispatchTurn) {
	if p != nil {
		p.m.Delete(t)
	}
}
