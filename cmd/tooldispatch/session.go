package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/tooldispatch/tooldispatch/messages"
)

// sessionOutput is what "session" prints: the session's tool messages in
// order, and for each turn its assistant message followed by its tool
// messages (OpenAI message shapes; tool messages carry their status).
type sessionOutput struct {
	Tools         []toolMessageJSON `json:"tools"`
	ToolHistories []any             `json:"tool_histories"`
}

// maxListedSessions bounds how many session ids the message about an
// unknown session lists.
const maxListedSessions = 20

// cmdSession implements "tooldispatch session". A session with no
// committed turn, or a data directory that does not exist (it is not
// created), is an error (exit status 1) that says so and names the
// sessions the data directory holds: an empty result would look like a
// session that ran nothing.
func (e *env) cmdSession(args []string) error {
	o, err := e.parseFlags("session", args)
	if err != nil {
		return err
	}
	log := newLogger(e.stderr, o.logLevel)
	if _, err := os.Stat(o.data); errors.Is(err, fs.ErrNotExist) {
		return failf(exitInput, "no data directory at %s: nothing has run with this workspace and data directory yet (give the --workspace or --data that run or serve used)", o.data)
	}
	store, err := openStore(o.data, false, false, log)
	if held := (*storeHeldError)(nil); errors.As(err, &held) {
		held.session = o.session
	}
	if err != nil {
		return failf(exitFailure, "opening the store in %s: %v", o.data, err)
	}
	ctx := context.Background()
	turns, err := store.Turns(ctx, o.session)
	var ids []string
	if err == nil && len(turns) == 0 {
		ids, err = store.Sessions(ctx)
	}
	if cerr := store.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return failf(exitFailure, "reading session %q: %v", o.session, err)
	}
	if len(turns) == 0 {
		return failf(exitInput, "session %q has no committed turns in %s (%s)", o.session, o.data, sessionList(ids))
	}
	out := sessionOutput{Tools: []toolMessageJSON{}, ToolHistories: []any{}}
	fillSession(&out, turns)
	return writeOut(writeJSON(e.stdout, out))
}

// sessionList names the sessions of a data directory for a message.
func sessionList(ids []string) string {
	switch {
	case len(ids) == 0:
		return "it holds no session"
	case len(ids) > maxListedSessions:
		return fmt.Sprintf("sessions there: %s and %d more", strings.Join(ids[:maxListedSessions], ", "), len(ids)-maxListedSessions)
	}
	return "sessions there: " + strings.Join(ids, ", ")
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
