package interact

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// How long ask_user waits for an answer.
const (
	defaultAskWait = 300 * time.Second
	maxAskWait     = 3600 * time.Second
	// askUserTimeout is the tool's declared timeout: the longest wait plus
	// room to hand the answer back, so the wait ends the call, not the
	// dispatcher's timeout.
	askUserTimeout = maxAskWait + time.Minute
)

func askUserTool() toolkit.Tool {
	return toolkit.Tool{
		Name: "ask_user",
		Description: "Ask the user a question and wait for the answer. Use it when a decision is theirs or information " +
			"only they have is missing, not for things you can find out yourself. Offer options when the choice is " +
			"between a few answers. If nobody answers in time (or nobody is there), the call is skipped: go on " +
			"without the answer.",
		Schema: toolkit.SchemaLiteral(`{
			"type": "object",
			"properties": {
				"question": {
					"type": "string",
					"description": "The question, complete enough to answer without other context.",
					"minLength": 1,
					"maxLength": 4000
				},
				"options": {
					"type": "array",
					"description": "Suggested answers; the user may pick one (by number or text) or answer freely.",
					"items": {"type": "string", "minLength": 1, "maxLength": 500},
					"maxItems": 20
				},
				"timeout_seconds": {
					"type": "integer",
					"description": "How long to wait for the answer, in seconds (default 300, at most 3600).",
					"minimum": 1,
					"maximum": 3600
				}
			},
			"required": ["question"],
			"additionalProperties": false
		}`),
		// Interactive: one question at a time, in call order.
		Concurrent: false,
		// Asking changes nothing; the human decides by answering.
		ReadOnly: true,
		Timeout:  askUserTimeout,
		Handler:  askUser,
		// The same question asked again wants a fresh answer.
		NoDedup: true,
	}
}

func askUser(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	question := strings.TrimSpace(c.Args.String("question"))
	if question == "" {
		return toolkit.Result{}, errors.New("question is empty")
	}
	var options []string
	for _, o := range c.Args.Strings("options") {
		if o = strings.TrimSpace(o); o != "" {
			options = append(options, o)
		}
	}
	wait := time.Duration(c.Args.Int("timeout_seconds", int64(defaultAskWait/time.Second))) * time.Second
	wait = min(max(wait, time.Second), maxAskWait)

	text := question
	if len(options) > 0 {
		var b strings.Builder
		b.WriteString(question)
		b.WriteString("\nOptions:")
		for i, o := range options {
			fmt.Fprintf(&b, "\n%d. %s", i+1, o)
		}
		text = b.String()
	}

	askCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	ans, err := c.Ask(askCtx, toolkit.Question{Kind: toolkit.QuestionText, Text: text})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		// The call itself ended (the turn was canceled): not a missing answer.
		return toolkit.Result{}, ctx.Err()
	case errors.Is(err, toolkit.ErrNobodyToAsk):
		return toolkit.Result{}, toolkit.Skipped("nobody is there to answer questions in this run. Go on without the answer: " +
			"make a reasonable assumption, say which in your result, or ask again in a later run.")
	case errors.Is(err, context.DeadlineExceeded):
		return toolkit.Result{}, toolkit.Skipped("the user did not answer within %s. Go on without the answer, using your "+
			"best judgement, or ask again later if it is essential.", wait)
	default:
		return toolkit.Result{}, fmt.Errorf("asking the user: %w", err)
	}
	reply := strings.TrimSpace(ans.Text)
	switch {
	case ans.Declined:
		return toolkit.Result{}, toolkit.Skipped("the user declined to answer. Go on without the answer, using your best " +
			"judgement, or ask again later if it is essential.")
	case reply == "":
		return toolkit.Result{}, toolkit.Skipped("the user gave an empty answer. Go on without the answer, or ask again " +
			"later if it is essential.")
	}
	return toolkit.Result{Content: "The user answered: " + withOption(reply, options)}, nil
}

// withOption names the option an answer picks, by number or by text.
func withOption(reply string, options []string) string {
	if n, err := strconv.Atoi(strings.TrimSuffix(reply, ".")); err == nil && n >= 1 && n <= len(options) {
		return fmt.Sprintf("%s (option %d: %s)", reply, n, options[n-1])
	}
	for i, o := range options {
		if strings.EqualFold(reply, o) {
			return fmt.Sprintf("%s (option %d)", reply, i+1)
		}
	}
	return reply
}
