package main

import (
	"context"
	"errors"
	"io/fs"
	"os"

	"github.com/tooldispatch/tooldispatch/messages"
)

// sessionOutput is what "session" prints: the session's tool messages in
// order, and for each turn its assistant message followed by its tool
// messages (OpenAI message shapes; tool messages carry their status).
type sessionOutput struct {
	Tools         []toolMessageJSON `json:"tools"`
	ToolHistories []any             `json:"tool_histories"`
}

// cmdSession implements "tooldispatch session". A data directory that does
// not exist holds no sessions: it prints empty lists and is not created.
func (e *env) cmdSession(args []string) error {
	o, err := e.parseFlags("session", args)
	if err != nil {
		return err
	}
	log := newLogger(e.stderr, o.logLevel)
	out := sessionOutput{Tools: []toolMessageJSON{}, ToolHistories: []any{}}
	if _, err := os.Stat(o.data); errors.Is(err, fs.ErrNotExist) {
		return writeOut(writeJSON(e.stdout, out))
	}
	store, err := openStore(o.data, false, false, log)
	if held := (*storeHeldError)(nil); errors.As(err, &held) {
		held.session = o.session
	}
	if err != nil {
		return failf(exitFailure, "opening the store in %s: %v", o.data, err)
	}
	turns, err := store.Turns(context.Background(), o.session)
	if cerr := store.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return failf(exitFailure, "reading session %q: %v", o.session, err)
	}
	fillSession(&out, turns)
	return writeOut(writeJSON(e.stdout, out))
}

// fillSession adds the turns' messages to out.
func fillSession(out *sessionOutput, turns []*messages.TurnRecord) {
	for _, t := range turns {
		out.ToolHistories = append(out.ToolHistories, assistantMessageJSON(t.GetAssistant()))
		for _, m := range t.GetToolMessages() {
			tm := toolJSON(m)
			out.Tools = append(out.Tools, tm)
			out.ToolHistories = append(out.ToolHistories, tm)
		}
	}
}
