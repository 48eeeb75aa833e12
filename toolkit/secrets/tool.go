package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// StoreSecretName is the name of the tool that asks the human for a secret.
const StoreSecretName = "store_secret"

// askTimeout is how long store_secret waits for the human to enter a value
// before the call is skipped; the tool's own timeout is a little longer, so
// that a human who does not answer reads "skipped", not "timeout".
const (
	askTimeout       = 5 * time.Minute
	storeSecretGrace = 30 * time.Second
)

const storeSecretSchema = `{
  "type": "object",
  "properties": {
    "name": {
      "type": "string",
      "pattern": "^[A-Za-z_][A-Za-z0-9_.-]{0,63}$",
      "description": "Name to store the secret under, e.g. GITHUB_TOKEN; reference it later as ${secret:NAME}."
    },
    "description": {
      "type": "string",
      "maxLength": 500,
      "description": "What the secret is for, shown to the user when asking (e.g. \"GitHub token with repo scope\")."
    }
  },
  "required": ["name"],
  "additionalProperties": false
}`

// StoreSecretTool returns the store_secret tool: it asks the human behind
// the run for a secret value, which the model never sees, and stores it
// encrypted in s. It is interactive, so it is not concurrent and needs no
// approval (the human is asked anyway); when nobody answers the call ends
// skipped.
func StoreSecretTool(s *Store) toolkit.Tool {
	if s == nil {
		panic("secrets: StoreSecretTool needs a Store")
	}
	return toolkit.Tool{
		Name: StoreSecretName,
		Description: "Ask the user to enter a secret (API key, token, password) and store it encrypted under a name. " +
			"You never see the value: reference it as ${secret:NAME} in http_request url, headers or body. " +
			"Use it when a request fails for a missing or rejected credential (401/403, missing key); " +
			"never ask the user to paste a secret into the chat.",
		Schema:     json.RawMessage(storeSecretSchema),
		Concurrent: false,
		ReadOnly:   true,
		Timeout:    askTimeout + storeSecretGrace,
		Handler:    func(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) { return storeSecret(ctx, s, c) },
	}
}

func storeSecret(ctx context.Context, s *Store, c *toolkit.Call) (toolkit.Result, error) {
	name := strings.TrimSpace(c.Args.String("name"))
	if !ValidName(name) {
		return toolkit.Result{}, fmt.Errorf("name %q is not a valid secret name: use letters, digits, '_', '.', '-', starting with a letter or '_', at most 64 characters", name)
	}
	desc := strings.TrimSpace(c.Args.String("description"))
	text := "Enter the value of the secret " + name
	if desc != "" {
		text += " (" + truncateUTF8(desc, MaxDescriptionLen) + ")"
	}
	text += ". It is stored encrypted and never shown to the model."
	if ok, _ := s.Has(ctx, name); ok {
		text += " A value is already stored under this name; the new one replaces it."
	}

	askCtx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	ans, err := c.Ask(askCtx, toolkit.Question{Kind: toolkit.QuestionSecret, Name: name, Text: text})
	switch {
	case errors.Is(err, toolkit.ErrNobodyToAsk):
		return toolkit.Result{}, toolkit.Skipped("nobody is there to enter the secret %q; ask the user to run with someone answering, or to store it another way", name)
	case err != nil && ctx.Err() != nil:
		return toolkit.Result{}, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return toolkit.Result{}, toolkit.Skipped("nobody entered the secret %q within %s", name, askTimeout)
	case err != nil:
		return toolkit.Result{}, fmt.Errorf("asking for the secret %q: %w", name, err)
	case ans.Declined:
		return toolkit.Result{}, toolkit.Skipped("the user declined to enter the secret %q", name)
	}
	value := strings.TrimSpace(ans.Text)
	if value == "" {
		return toolkit.Result{}, toolkit.Skipped("no value was entered for the secret %q", name)
	}
	if err := s.Put(ctx, name, value, desc); err != nil {
		// Put's errors name the secret and the rule, never the value.
		return toolkit.Result{}, fmt.Errorf("storing the secret %q: %w", name, err)
	}
	return toolkit.Result{Content: fmt.Sprintf("Stored the secret %q (encrypted; its value is never shown). "+
		"Reference it as %s in http_request url, headers or body, e.g. header \"Authorization\": \"Bearer %s\".",
		name, Reference(name), Reference(name))}, nil
}
