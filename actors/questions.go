package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Errors of Answer and ClientResult.
var (
	// ErrNoPending: no question or client call with that id is waiting.
	ErrNoPending = errors.New("actors: no pending question or client call with that id")
	// ErrAlreadyAnswered: the question or client call was already settled.
	ErrAlreadyAnswered = errors.New("actors: already answered")
	// ErrInvalidAnswer: the answer does not match what the question asks
	// for (toolkit.Question.Validate); the question still waits.
	ErrInvalidAnswer = errors.New("actors: the answer does not match what was asked")
)

// ElicitDeclined is the status of an elicitation event that no person
// was asked (nobody can answer in that run): the server was declined at
// once.
const ElicitDeclined = "declined"

// nobodyNote ends the note of an elicitation declined at once.
const nobodyNote = "Declined at once: nobody can answer in this run (a run without a person, or a call whose turn has ended)."

type questionKey struct{ session, callID string }

// questionBoard holds the questions tools are waiting on (ask_user,
// store_secret). A tool blocks in its own call actor while it waits, so the
// answer reaches it through this board instead of a mailbox. Safe for
// concurrent use.
type questionBoard struct {
	mu       sync.Mutex
	waiting  map[questionKey]*waiter // guarded by mu
	answered map[questionKey]bool    // guarded by mu
}

// waiter is a question waiting for its answer.
type waiter struct {
	ch       chan toolkit.Answer // cap 1
	validate func(toolkit.Answer) error
}

func newQuestionBoard() *questionBoard {
	return &questionBoard{waiting: map[questionKey]*waiter{}, answered: map[questionKey]bool{}}
}

// asker returns the Asker of one call: it emits the question as an event
// and waits for Answer, the call's context, or nobody listening. A
// request for input from outside (toolkit.QuestionElicit) waits at most
// elicitWait, as a confirmation does. With nobody set, no person can
// answer: every question fails at once with toolkit.ErrNobodyToAsk, and a
// request for input from outside is still announced, its event marked
// declined (status "declined", the note saying why), so that what the
// server asked is seen.
func (b *questionBoard) asker(em *emitter, session, callID, tool string, elicitWait time.Duration, nobody bool) toolkit.Asker {
	return func(ctx context.Context, q toolkit.Question) (toolkit.Answer, error) {
		if !em.active() {
			return toolkit.Answer{}, toolkit.ErrNobodyToAsk
		}
		if nobody {
			if q.Kind == toolkit.QuestionElicit {
				em.emit(&messages.Event{Kind: q.Kind, CallId: callID, Tool: tool, Text: q.Text, Arguments: string(q.Schema),
					Status: ElicitDeclined, Note: strings.TrimSpace(q.Note + " " + nobodyNote)})
			}
			return toolkit.Answer{}, toolkit.ErrNobodyToAsk
		}
		k := questionKey{session, callID}
		w := &waiter{ch: make(chan toolkit.Answer, 1), validate: q.Validate}
		b.mu.Lock()
		if _, busy := b.waiting[k]; busy {
			b.mu.Unlock()
			return toolkit.Answer{}, errors.New("this call is already waiting for an answer")
		}
		b.waiting[k] = w
		delete(b.answered, k)
		b.mu.Unlock()
		defer func() {
			b.mu.Lock()
			if b.waiting[k] == w {
				delete(b.waiting, k)
			}
			b.mu.Unlock()
		}()
		kind := q.Kind
		if kind == "" {
			kind = toolkit.QuestionText
		}
		ev := &messages.Event{Kind: kind, CallId: callID, Tool: tool, Text: q.Text, Arguments: q.Name}
		if kind == toolkit.QuestionElicit {
			ev.Arguments, ev.Note = string(q.Schema), q.Note
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, elicitWait)
			defer cancel()
		}
		em.emit(ev)
		select {
		case a := <-w.ch:
			return a, nil
		case <-ctx.Done():
			return toolkit.Answer{}, ctx.Err()
		}
	}
}

// answer delivers an answer to a waiting question.
func (b *questionBoard) answer(session, callID string, a toolkit.Answer) error {
	k := questionKey{session, callID}
	w, err := b.waiter(k)
	if err != nil {
		return err
	}
	// Checked outside the lock: other questions' answers need not wait.
	if w.validate != nil && !a.Declined {
		if err := w.validate(a); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidAnswer, err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiting[k] != w {
		// Answered, or given up on, while the answer was checked.
		if b.answered[k] {
			return ErrAlreadyAnswered
		}
		return ErrNoPending
	}
	delete(b.waiting, k)
	if len(b.answered) > 10000 {
		clear(b.answered)
	}
	b.answered[k] = true
	w.ch <- a
	return nil
}

// waiter returns the question waiting under k, or why there is none.
func (b *questionBoard) waiter(k questionKey) (*waiter, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w, ok := b.waiting[k]
	if !ok {
		if b.answered[k] {
			return nil, ErrAlreadyAnswered
		}
		return nil, ErrNoPending
	}
	return w, nil
}
