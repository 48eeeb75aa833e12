package toolkit

import (
	"context"
	"errors"
	"fmt"
)

// Question kinds a tool can put to the human behind a run.
const (
	// QuestionText asks for a free-text answer (ask_user).
	QuestionText = "ask_user"
	// QuestionSecret asks for a secret value (store_secret). The answer is
	// never put in an event, a log line, a history entry or an error.
	QuestionSecret = "secret_request"
	// QuestionElicit passes on a request for input from outside
	// tooldispatch (an MCP server's elicitation): the answer is a JSON
	// object matching Schema, or a decline. Nobody answering within the
	// confirmation timeout is a decline.
	QuestionElicit = "elicitation"
)

// Question is what a tool asks the human.
type Question struct {
	Kind string // QuestionText, QuestionSecret or QuestionElicit
	Text string // shown to the human; never a secret
	// Name of the secret asked for (QuestionSecret).
	Name string
	// Origins the secret would be sent to (QuestionSecret), as the model
	// proposed them; the human confirms them with the value, or narrows
	// them in Answer.Origins.
	Origins []string
	// Schema is the JSON Schema the answer must match (QuestionElicit).
	Schema []byte
	// Note is shown with the question: who asks (the MCP server), and a
	// warning when the question looks like a request for a secret.
	Note string
	// Validate, when set, checks an answer (not a decline) before it is
	// taken: an answer it refuses is refused to the one who gave it, with
	// the error, and the question keeps waiting.
	Validate func(Answer) error
}

// Answer is the human's reply.
type Answer struct {
	Text string
	// Declined: the human chose not to answer.
	Declined bool
	// Origins (QuestionSecret), when not empty, narrows the origins the
	// secret may be sent to: a subset of Question.Origins. Empty confirms
	// them all.
	Origins []string
}

// ErrNobodyToAsk: no human is listening for questions in this run.
var ErrNobodyToAsk = errors.New("toolkit: nobody is listening for questions")

// Asker lets a handler ask the human behind the run and wait for the
// answer; it returns ctx.Err() when the call's context ends first.
type Asker func(ctx context.Context, q Question) (Answer, error)

// SkippedError makes a call end with status skipped instead of error.
type SkippedError struct{ Reason string }

func (e *SkippedError) Error() string { return "skipped: " + e.Reason }

// Skipped returns an error that ends the call with status skipped.
func Skipped(format string, a ...any) error {
	return &SkippedError{Reason: fmt.Sprintf(format, a...)}
}
