package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/internal/rundecl"
	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// readResult is one turn, or the error that ends the input.
type readResult struct {
	turn *inputTurn
	err  error
}

// runner is one invocation of run. Its fields are used by the run loop's
// goroutine, except where noted.
type runner struct {
	e   *env
	o   *options
	log zerolog.Logger

	out          *output
	stack        *stack
	inputIsStdin bool

	// prompter is read by the event callback on actor goroutines.
	prompter    atomic.Pointer[prompter]
	promptTried bool
	approve     string // the approval of turns that do not set their own
	warnedAsk   bool
	decls       rundecl.Table // what each run's turns declared for the run
}

// cmdRun implements "tooldispatch run".
func (e *env) cmdRun(args []string) error {
	o, err := e.parseFlags("run", args)
	if err != nil {
		return err
	}
	r := &runner{e: e, o: o, log: newLogger(e.stderr, o.logLevel)}
	if e.ignoreSIGPIPE != nil {
		// A reader of stdout that goes away must not kill a turn midway:
		// the turn commits, and run stops with the write error.
		e.ignoreSIGPIPE()
	}

	input, closeInput, err := r.openInput()
	if err != nil {
		return err
	}
	r.out = newOutputFor(e.stdout, o.pretty.or(e.stdoutTerminal))
	// run has no person to answer a question: stdin carries turns, and
	// its prompter answers confirmations only.
	o.nobodyAnswers = true
	r.stack, err = openStack(o, r.log, r.event)
	if err != nil {
		closeInput()
		r.out.Close()
		return err
	}
	r.setApproval()

	err = r.loop(input, closeInput)

	if p := r.prompter.Load(); p != nil {
		p.Close()
	}
	if cerr := r.stack.close(r.log); cerr != nil && (err == nil || errors.Is(cerr, errStoreStuck)) {
		err = failf(exitFailure, "%v", cerr)
	}
	if werr := r.out.Close(); werr != nil && err == nil {
		err = failf(exitFailure, "writing the output: %v", werr)
	}
	return err
}

// openInput opens FILE, or stdin when it is absent or "-". closeInput
// closes what openInput opened and reports whether a read still pending
// ends: true for files (os.Open makes pipes and terminals interruptible, and
// regular files do not block) and for a stdin that can be closed, false for
// the process's own stdin, whose blocking read nothing interrupts.
func (r *runner) openInput() (in io.Reader, closeInput func() bool, err error) {
	if len(r.o.args) == 0 || r.o.args[0] == "-" {
		r.inputIsStdin = true
		return r.e.stdin, func() bool {
			c, ok := r.e.stdin.(io.Closer)
			if !ok || r.e.stdin == io.Reader(os.Stdin) {
				return false
			}
			c.Close()
			return true
		}, nil
	}
	f, err := os.Open(r.o.args[0])
	if err != nil {
		return nil, nil, failf(exitInput, "reading turns: %v", err)
	}
	return f, func() bool { f.Close(); return true }, nil
}

// event receives every event of the dispatcher, on actor goroutines: it
// only queues work, so it never blocks.
func (r *runner) event(ev *messages.Event) {
	if ev.GetKind() == actors.EventToolConfirm {
		if p := r.prompter.Load(); p != nil {
			p.Ask(ev)
		}
	}
	if r.o.events {
		r.out.Event(ev)
	}
}

// setApproval settles the approval of turns that do not set their own:
// --approve, or ask when a terminal can be opened for prompts and none
// otherwise. Ask without a terminal degrades to none, with a warning.
func (r *runner) setApproval() {
	switch r.o.approve {
	case "":
		r.approve = actors.ApproveNone
		if r.openPrompter() {
			r.approve = actors.ApproveAsk
		}
	case actors.ApproveAsk:
		r.approve = r.askOrNone("--approve ask")
	default:
		r.approve = r.o.approve
	}
}

// askOrNone returns ask when a prompter is available, none (with a warning,
// once) when not.
func (r *runner) askOrNone(who string) string {
	if r.openPrompter() {
		return actors.ApproveAsk
	}
	if !r.warnedAsk {
		r.warnedAsk = true
		fmt.Fprintf(r.e.stderr, "tooldispatch: warning: %s, but no terminal can be opened to ask on: "+
			"calls that change things are skipped, as with --approve none\n", who)
	}
	return actors.ApproveNone
}

// openPrompter opens the terminal prompts go to, once, and reports whether
// there is one: stdin when it is a terminal and not the turn input,
// /dev/tty otherwise.
func (r *runner) openPrompter() bool {
	if r.promptTried {
		return r.prompter.Load() != nil
	}
	r.promptTried = true
	var p *prompter
	switch {
	case !r.inputIsStdin && r.e.stdinTerminal:
		p = newPrompter(r.e.stdin, r.e.stderr, nil)
	case r.e.openTTY != nil:
		tty, err := r.e.openTTY()
		if err != nil {
			r.log.Debug().Err(err).Msg("no terminal for confirmations")
			return false
		}
		p = newPrompter(tty, tty, tty)
	default:
		return false
	}
	p.Start(r.stack.disp.Confirm)
	r.prompter.Store(p)
	return true
}

// loop reads and dispatches turns until the input ends, a turn cannot be
// read or dispatched, or a signal arrives.
func (r *runner) loop(input io.Reader, closeInput func() bool) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopSignals := r.watchSignals(cancel)

	turns := make(chan readResult)
	stopReading := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		tr := newTurnReader(input, actors.EncodedTurnLimit(r.stack.cfg.Dispatcher.maxTurnBytes()))
		for {
			t, err := tr.Next()
			select {
			case turns <- readResult{t, err}:
			case <-stopReading:
				return
			}
			if err != nil {
				return
			}
		}
	}()

	var err error
	inputEnded := false
read:
	for ctx.Err() == nil {
		var rr readResult
		select {
		case rr = <-turns:
		case <-ctx.Done():
			break read
		}
		if rr.err != nil {
			inputEnded = true
			if !errors.Is(rr.err, io.EOF) {
				err = &exitError{code: exitInput, err: rr.err}
			}
			break
		}
		if err = r.dispatch(ctx, rr.turn); err != nil {
			break
		}
	}

	close(stopReading)
	if interrupted := closeInput(); inputEnded || interrupted {
		<-readerDone
	}
	// Otherwise the reader is blocked reading the process's stdin; it ends
	// with the process, which is about to exit.
	if s := stopSignals(); s != nil {
		return failf(signalExit(s), "stopped by signal (%v): no more turns are read; a turn that was running was canceled, and its results are committed and printed", s)
	}
	return err
}

// watchSignals cancels the run at the first SIGINT or SIGTERM and exits at
// once at the second. stop ends the watch and returns the first signal, if
// any.
func (r *runner) watchSignals(cancel context.CancelFunc) (stop func() os.Signal) {
	if r.e.notify == nil {
		return func() os.Signal { return nil }
	}
	sigs, unsubscribe := r.e.notify()
	first := make(chan os.Signal, 1)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case s := <-sigs:
			first <- s
			cancel()
			// The canceled turn commits and the store closes within the
			// close budget, however the store behaves.
			stop := r.e.watchShutdown(closeBudget, r.log, &r.stack.stages, r.stack.stuckReason)
			defer stop()
		case <-quit:
			return
		}
		select {
		case s := <-sigs:
			fmt.Fprintf(r.e.stderr, "tooldispatch: second signal (%v): exiting without waiting\n", s)
			if r.e.exitNow != nil {
				r.e.exitNow(signalExit(s))
			}
		case <-quit:
		}
	}()
	return func() os.Signal {
		close(quit)
		wg.Wait()
		unsubscribe()
		select {
		case s := <-first:
			return s
		default:
			return nil
		}
	}
}

// dispatch runs one turn and queues its result lines.
func (r *runner) dispatch(ctx context.Context, t *inputTurn) error {
	if g := r.stack.space; g != nil {
		// Below the reserve no turn starts: run stops, as serve answers 507.
		if err := g.Admit(); err != nil {
			return failf(exitNoSpace, "turn %d not run: %v", t.Index, err)
		}
	}
	p, err := r.request(t)
	var refused *turnRefused
	if errors.As(err, &refused) {
		r.refuse(refused)
		return r.out.Err()
	}
	if err != nil {
		return &exitError{code: exitInput, err: err}
	}
	res, err := r.stack.disp.DispatchPrepared(ctx, p)
	if res != nil {
		r.out.TurnReply(res.GetTurn(), t.Message, res.GetMessages(), r.shape(t.Format))
	}
	err = r.outcome(t, err)
	r.stack.chaos.answered(p.Turn().GetSession(), res.GetTurn(), runAnswer(res, err))
	return err
}

// outcome is what run does after a dispatched turn: go on (nil), or stop
// with the exit status its error says.
func (r *runner) outcome(t *inputTurn, err error) error {
	switch {
	case errors.Is(err, actors.ErrBadRequest), errors.Is(err, actors.ErrTurnIDConflict):
		return &exitError{code: exitInput, err: &inputError{Turn: t.Index, Offset: t.Offset, Err: err}}
	case errors.Is(err, cachestore.ErrNoSpace):
		return failf(exitNoSpace, "turn %d: %v", t.Index, err)
	case err != nil:
		return failf(exitFailure, "turn %d: the dispatcher failed (store in %s): %v", t.Index, r.o.data, err)
	}
	if err := r.out.Err(); err != nil {
		return failf(exitFailure, "writing the results: %v", err)
	}
	return nil
}

// shape is the shape of the results of a turn that came in format f:
// Anthropic's and Gemini's for their messages; for OpenAI messages (chat
// completions or Responses) the strict shape with --openai-strict, the one
// with statuses otherwise.
func (r *runner) shape(f messages.Format) messages.Shape {
	if r.o.openAIStrict {
		return messages.ReplyShape(f, messages.ShapeOpenAIStrict)
	}
	return messages.ReplyShape(f, messages.ShapeOpenAI)
}

// turnRefused is a turn that is well formed but cannot run as declared (a
// client tool collides with a built-in in the tools array): that turn is
// refused, the input goes on.
type turnRefused struct {
	turn *inputTurn
	err  error
}

func (e *turnRefused) Error() string { return e.err.Error() }

// refuse answers every call of a refused turn with an error naming the
// reason, without dispatching it (nothing is run or recorded), and warns.
func (r *runner) refuse(tr *turnRefused) {
	fmt.Fprintf(r.e.stderr, "tooldispatch: turn refused, the input goes on: %v\n", tr.err)
	text := "not run: the turn was refused: " + tr.err.Error()
	var msgs []*messages.ToolMessage
	calls := tr.turn.Message.GetToolCalls()
	ids := messages.CallIDs(calls)
	for i, tc := range calls {
		msgs = append(msgs, &messages.ToolMessage{Role: "tool", ToolCallId: ids[i], Name: tc.GetFunction().GetName(),
			Status: string(toolkit.StatusError), Content: text})
	}
	r.out.TurnReply(0, tr.turn.Message, msgs, r.shape(tr.turn.Format))
}

// request builds and prepares the DispatchTurn of t: the envelope's fields
// over the flags, and the run's declarations.
func (r *runner) request(t *inputTurn) (*actors.Prepared, error) {
	dt := &messages.DispatchTurn{
		Session:         cmp.Or(t.Session, r.o.session),
		Run:             cmp.Or(t.Run, r.o.run),
		Provider:        cmp.Or(t.Provider, r.o.provider),
		Message:         t.Message,
		TurnId:          t.TurnID,
		AutoLoadSchemas: r.stack.cfg.Dispatcher.AutoLoadSchemas,
		Chaos:           t.Chaos,
		Traceparent:     t.Traceparent,
		// The tools array is in the message's format unless the envelope
		// says otherwise (openai-strict for chat completions).
		ToolsFormat: cmp.Or(t.ToolsFormat, string(t.Format)),
	}
	if t.HasAutoLoadSchemas {
		dt.AutoLoadSchemas = t.AutoLoadSchemas
	}
	key := rundecl.Key{Session: dt.Session, Run: dt.Run}
	decl := r.decls.Merge(key, t.ClientTools, t.HasClientTools, t.Exclude, t.HasExclude)
	dt.ClientTools, dt.Exclude = decl.ClientTools, decl.Exclude

	// A turn that says nothing asks for r.approve. --approve (ask when
	// absent) is the dispatcher's ceiling (SPEC §16, Config.MaxApprove):
	// the dispatcher settles the turn's approval under it once, when it
	// checks the turn, builds its tools view and chaos policy and parses
	// its calls, before anything runs; what it refuses is bad input. A
	// turn that would ask when nobody can be asked is narrowed to none.
	dt.Approve = cmp.Or(t.Approve, r.approve)
	var narrow actors.Policy
	if approve, _ := r.stack.disp.Approval(dt.Approve, narrow); approve == actors.ApproveAsk {
		who := "--approve ask"
		if t.Approve != "" {
			who = fmt.Sprintf("turn %d asks for approve %q", t.Index, t.Approve)
		}
		if r.askOrNone(who) != actors.ApproveAsk {
			narrow.MaxApprove = actors.ApproveNone
		}
	}
	p, err := r.stack.disp.PrepareWith(dt, narrow)
	if err != nil {
		ie := &inputError{Turn: t.Index, Offset: t.Offset, Err: err}
		if errors.Is(err, toolkit.ErrToolCollision) {
			// A well-formed turn that cannot run as declared: refused,
			// the run keeps its declarations, the input goes on.
			r.decls.Put(key, decl)
			return nil, &turnRefused{turn: t, err: ie}
		}
		return nil, ie
	}
	r.decls.Put(key, decl)
	return p, nil
}
