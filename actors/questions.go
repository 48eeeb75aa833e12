package actors

import (
	"context"
	"errors"
	"sync"

	"github.com/tooldispatch/tooldispatch/messages"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Errors of Answer and ClientResult.
var (
	// ErrNoPending: no question or client call with that id is waiting.
	ErrNoPending = errors.New("actors: no pending question or client call with that id")
	// ErrAlreadyAnswered: the question or client call was already settled.
	ErrAlreadyAnswered = errors.New("actors: already answered")
)

type questionKey struct{ session, callID string }

// questionBoard holds the questions tools are waiting on (ask_user,
// store_secret). A tool blocks in its own call actor while it waits, so the
// answer reaches it through this board instead of a mailbox. Safe for
// concurrent use.
type questionBoard struct {
	mu       sync.Mutex
	waiting  map[questionKey]chan toolkit.Answer // guarded by mu
	answered map[questionKey]bool                // guarded by mu
}

func newQuestionBoard() *questionBoard {
	return &questionBoard{waiting: map[questionKey]chan toolkit.Answer{}, answered: map[questionKey]bool{}}
}

// asker returns the Asker of one call: it emits the question as an event
// and waits for Answer, the call's context, or nobody listening.
func (b *questionBoard) asker(em *emitter, session, callID, tool string) toolkit.Asker {
	return func(ctx context.Context, q toolkit.Question) (toolkit.Answer, error) {
		if !em.active() {
			return toolkit.Answer{}, toolkit.ErrNobodyToAsk
		}
		k := questionKey{session, callID}
		ch := make(chan toolkit.Answer, 1)
		b.mu.Lock()
		if _, busy := b.waiting[k]; busy {
			b.mu.Unlock()
			return toolkit.Answer{}, errors.New("this call is already waiting for an answer")
		}
		b.waiting[k] = ch
		delete(b.answered, k)
		b.mu.Unlock()
		defer func() {
			b.mu.Lock()
			if b.waiting[k] == ch {
				delete(b.waiting, k)
			}
			b.mu.Unlock()
		}()
		kind := q.Kind
		if kind == "" {
			kind = toolkit.QuestionText
		}
		em.emit(&messages.Event{Kind: kind, CallId: callID, Tool: tool, Text: q.Text, Arguments: q.Name})
		select {
		case a := <-ch:
			return a, nil
		case <-ctx.Done():
			return toolkit.Answer{}, ctx.Err()
		}
	}
}

// answer delivers an answer to a waiting question.
func (b *questionBoard) answer(session, callID string, a toolkit.Answer) error {
	k := questionKey{session, callID}
	b.mu.Lock()
	defer b.mu.Unlock()
	ch, ok := b.waiting[k]
	if !ok {
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
	ch <- a
	return nil
}
