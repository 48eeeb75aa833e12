package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Bare is the dispatcher an actor design must justify itself against:
// goroutines and a channel semaphore, no actors. It does the same work per
// call and per turn as tooldispatch on the no-op workloads — strict parse
// and canonical form, cached schema, validation, de-dup key; an intent
// record before each segment; one commit per turn through the same store —
// and keeps program order (a sequential call runs alone). It has none of
// the rest (confirmations, events, cancellation, watchdogs, supervision).
type Bare struct {
	reg   *toolkit.Registry
	store cachestore.Store
	limit int

	mu   sync.Mutex
	next map[string]int64 // guarded by mu: next turn per session
}

// NewBare returns a bare dispatcher over reg and store.
func NewBare(reg *toolkit.Registry, store cachestore.Store, limit int) *Bare {
	return &Bare{reg: reg, store: store, limit: limit, next: map[string]int64{}}
}

type barePlan struct {
	tool *toolkit.Tool
	args toolkit.Args
	key  string // de-duplication key
	msg  *messages.ToolMessage
}

// Dispatch runs one turn. Turns of one session must not overlap.
func (b *Bare) Dispatch(ctx context.Context, t *messages.DispatchTurn) error {
	b.mu.Lock()
	turn, ok := b.next[t.Session]
	b.mu.Unlock()
	if !ok {
		st, err := b.store.LoadSession(ctx, t.Session)
		if err != nil {
			return err
		}
		turn = st.NextTurn
	}
	calls := t.Message.GetToolCalls()
	plans := make([]barePlan, len(calls))
	names, ids := make([]string, len(calls)), make([]string, len(calls))
	for i, tc := range calls {
		name := tc.GetFunction().GetName()
		names[i], ids[i] = name, tc.GetId()
		msg := &messages.ToolMessage{Role: "tool", ToolCallId: tc.GetId(), Name: name}
		plans[i].msg = msg
		tool, ok := b.reg.Lookup(name)
		if !ok {
			msg.Status, msg.Content = string(toolkit.StatusUnknownTool), "unknown tool"
			continue
		}
		args, err := toolkit.ParseArgs(tc.GetFunction().GetArguments(), toolkit.Limits{})
		if err != nil {
			msg.Status, msg.Content = string(toolkit.StatusInvalidArgs), err.Error()
			continue
		}
		s, err := b.reg.Schemas.Compile(tool.Schema)
		if err == nil {
			err = s.Validate(args.Value)
		}
		if err != nil {
			msg.Status, msg.Content = string(toolkit.StatusInvalidArgs), err.Error()
			continue
		}
		_ = args.Hash()
		plans[i].tool, plans[i].args, plans[i].key = tool, args, toolkit.DedupKey(name, args)
	}
	intent := &cachestore.Intent{Session: t.Session, Turn: turn, Run: t.Run, Assistant: t.Message,
		Decided: map[int]*messages.ToolMessage{}, Names: names, IDs: ids}
	sem := make(chan struct{}, b.limit)
	idx := make([]int, len(plans))
	for i := range idx {
		idx[i] = i
	}
	// The segments of pass 2, by the dispatcher's own rule (a call that
	// cannot run is a segment of its own, which writes no intent).
	for _, segIdx := range toolkit.Segments(idx, func(k int) bool { return plans[k].tool != nil && plans[k].tool.Concurrent }) {
		i, j := segIdx[0], segIdx[len(segIdx)-1]+1
		seg := plans[i:j]
		runnable := false
		for k := i; k < j; k++ {
			if plans[k].tool != nil {
				intent.Started = append(intent.Started, k)
				runnable = true
			}
		}
		if runnable {
			in := *intent
			if err := b.store.WriteIntent(ctx, &in); err != nil {
				return err
			}
		}
		var wg sync.WaitGroup
		for k := range seg {
			p := &seg[k]
			if p.tool == nil {
				continue
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				b.run(ctx, t, turn, p)
			}()
		}
		wg.Wait()
	}
	msgs := make([]*messages.ToolMessage, len(plans))
	var dedup []*cachestore.DedupEntry
	for i := range plans {
		msgs[i] = plans[i].msg
		if plans[i].key != "" && msgs[i].Status == string(toolkit.StatusOK) {
			// The same run-state write as the dispatcher's commit.
			dedup = append(dedup, &cachestore.DedupEntry{Key: plans[i].key, Tool: msgs[i].Name, Content: msgs[i].Content})
		}
	}
	err := b.store.CommitTurn(ctx, &cachestore.TurnCommit{Session: t.Session,
		Record: &messages.TurnRecord{Turn: turn, Run: t.Run, Assistant: t.Message, ToolMessages: msgs,
			TimeUnixNano: time.Now().UnixNano(), Provider: t.Provider}, DedupPut: dedup})
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.next[t.Session] = turn + 1
	b.mu.Unlock()
	return nil
}

func (b *Bare) run(ctx context.Context, t *messages.DispatchTurn, turn int64, p *barePlan) {
	cctx, cancel := context.WithTimeout(ctx, p.tool.EffectiveTimeout())
	defer cancel()
	res, err := p.tool.Handler(cctx, &toolkit.Call{Session: t.Session, Run: t.Run, Turn: turn, ID: p.msg.ToolCallId,
		Name: p.msg.Name, Args: p.args, Emit: func(string) {}})
	switch {
	case err == nil:
		p.msg.Status, p.msg.Content = string(toolkit.StatusOK), res.Content
	case errors.Is(err, context.DeadlineExceeded):
		p.msg.Status, p.msg.Content = string(toolkit.StatusTimeout), fmt.Sprintf("timed out: %v", err)
	default:
		p.msg.Status, p.msg.Content = string(toolkit.StatusError), strings.TrimSpace(err.Error())
	}
}
