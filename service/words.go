package service

import (
	"encoding/json"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/toolkit"
)

// States of a call that the page shows beside those of a TurnSummary,
// in the turn of a pending confirmation: a call before it that passed its
// checks and waits to run, a call after it that is not checked yet, and
// one of those that will ask when its turn comes.
const (
	StateReady    = "ready"
	StateUpcoming = "upcoming"
	StateNext     = "next"
)

// statusWords are the plain words the operator page shows for a call's
// state, its final status, or how its confirmation was settled; the
// codes stay in data attributes and the API.
var statusWords = map[string]string{
	StateChecking: "being checked",
	StateConfirm:  "waits for your answer",
	StateRunning:  "running",
	StateEnded:    "finished, being saved",
	StateDecided:  "settled without running, being saved",
	StateReady:    "checked, runs after the answers",
	StateUpcoming: "not checked yet",
	StateNext:     "asks you next",

	string(toolkit.StatusOK):             "done",
	string(toolkit.StatusError):          "failed",
	string(toolkit.StatusTimeout):        "timed out",
	string(toolkit.StatusCanceled):       "canceled",
	string(toolkit.StatusOutcomeUnknown): "interrupted, outcome unknown",
	string(toolkit.StatusUnknownTool):    "not run: no such tool",
	string(toolkit.StatusDeferred):       "not run: to be called through run_tool",
	string(toolkit.StatusSchemaReturned): "not run: its schema went to the model",
	string(toolkit.StatusInvalidArgs):    "not run: invalid arguments",
	string(toolkit.StatusDeduped):        "repeat: earlier result given",
	string(toolkit.StatusSkipped):        "not run: not approved",
	string(toolkit.StatusClientPending):  "left to the caller",
	"awaiting_approval":                  "waits for an answer",

	actors.ConfirmApproved: "approved, runs after the answers",
	actors.ConfirmDenied:   "denied",
	actors.ConfirmTimedOut: "no answer in time",
}

// statusText is the plain words for a state or status; an unknown code is
// shown as it is.
func statusText(code string) string {
	if w, ok := statusWords[code]; ok {
		return w
	}
	return code
}

// statusWordsJSON is statusWords for page.js, which shows live states in
// the same words.
func statusWordsJSON() string {
	b, err := json.Marshal(statusWords)
	if err != nil {
		panic(err) // a map of strings always encodes
	}
	return string(b)
}
