package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
    },
    "origins": {
      "type": "array",
      "items": {"type": "string", "maxLength": 300},
      "maxItems": 20,
      "description": "Where the secret may be sent, as scheme://host[:port], e.g. [\"https://api.github.com\"]. The user confirms them with the value; a ${secret:NAME} in a request to any other origin is refused. Needed unless the operator already bound the secret."
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
		Description: "Ask the user to enter a secret (API key, token, password) and store it encrypted under a name, " +
			"bound to the origins (scheme://host[:port]) it may be sent to, which the user confirms. " +
			"You never see the value: reference it as ${secret:NAME} in http_request url, headers or body of a request to one of those origins. " +
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
	proposed, err := ParseOrigins(stringList(c.Args.Value["origins"]))
	if err != nil {
		return toolkit.Result{}, fmt.Errorf("origins: %w; write each as scheme://host[:port], e.g. \"https://api.github.com\"", err)
	}
	bound := s.Bound(name)
	if len(proposed) == 0 && len(bound) == 0 {
		return toolkit.Result{}, fmt.Errorf("say where the secret %q may be sent: pass origins, e.g. [\"https://api.example.com\"] "+
			"(the user confirms them); a secret without origins could be sent nowhere", name)
	}
	text := "Enter the value of the secret " + name
	if desc != "" {
		text += " (" + truncateUTF8(desc, MaxDescriptionLen) + ")"
	}
	text += "."
	if len(proposed) > 0 {
		text += " It will be sent only to: " + strings.Join(proposed, ", ") + " (you may keep fewer of these)."
	}
	if len(bound) > 0 {
		text += " The configuration lets it go to: " + strings.Join(bound, ", ") + "."
	}
	text += " It is stored encrypted and never shown to the model."
	if ok, _ := s.Has(ctx, name); ok {
		text += " A value is already stored under this name; the new one replaces it."
	}

	askCtx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	ans, err := c.Ask(askCtx, toolkit.Question{Kind: toolkit.QuestionSecret, Name: name, Text: text, Origins: proposed})
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
	confirmed, err := narrowOrigins(proposed, ans.Origins)
	if err != nil {
		return toolkit.Result{}, fmt.Errorf("the answer for the secret %q: %w", name, err)
	}
	if err := s.Put(ctx, name, value, desc, confirmed...); err != nil {
		// Put's errors name the secret and the rule, never the value.
		return toolkit.Result{}, fmt.Errorf("storing the secret %q: %w", name, err)
	}
	allowed := unionOrigins(confirmed, bound)
	return toolkit.Result{Content: fmt.Sprintf("Stored the secret %q (encrypted; its value is never shown), to be sent only to %s. "+
		"Reference it as %s in http_request url, headers or body of a request to one of those origins, e.g. header \"Authorization\": \"Bearer %s\".",
		name, strings.Join(allowed, ", "), Reference(name), Reference(name))}, nil
}

// narrowOrigins returns the origins the human confirmed: all proposed when
// the answer names none, else the answer's, each of which must have been
// proposed (the human narrows, nobody widens).
func narrowOrigins(proposed, answered []string) ([]string, error) {
	if len(answered) == 0 {
		return proposed, nil
	}
	got, err := ParseOrigins(answered)
	if err != nil {
		return nil, err
	}
	for _, o := range got {
		if !slices.Contains(proposed, o) {
			return nil, fmt.Errorf("%w: %s was not among the origins asked about (%s); an answer may only keep fewer",
				ErrOrigin, o, strings.Join(proposed, ", "))
		}
	}
	return got, nil
}

// stringList returns the strings of a JSON array argument (others are
// skipped; the schema allows only strings).
func stringList(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
