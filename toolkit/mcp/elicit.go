package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// Elicitation: a server asks for input from the person behind the call
// (elicitation/create during a call; under 2026-07-28, an input request
// of a call or of a task). It becomes a question of that call
// (toolkit.QuestionElicit) on the event stream and the operator page: the
// server named, its message and requested schema shown, answered over the
// API with a JSON object that must match the schema (checked before it is
// taken, so a wrong answer can be corrected), or declined. Nobody
// listening, nobody answering within the confirmation timeout, a request
// that cannot be tied to one call, a URL-mode request or a schema that
// cannot be checked: declined, never answered in the person's stead.
const (
	// maxElicitMessage bounds a server's message shown to the person.
	maxElicitMessage = 4 << 10
	// elicitAccept and elicitDecline are the actions of an answer.
	elicitAccept  = "accept"
	elicitDecline = "decline"
)

// secretNames are what a requested field's name or title says when it
// asks for a secret, secretDescriptions what its description says (a
// narrower list: a description may well warn against giving a PIN).
// Servers must not ask for secrets this way (MCP: "Servers MUST NOT use
// form mode elicitation to request sensitive information"); such a
// request is shown with a warning.
var (
	secretNames        = regexp.MustCompile(`(?i)pass(word|phrase|code)?|passwd|secret|token|api[ _-]?key|private[ _-]?key|credential|^pin$|\botp\b|one[ _-]?time|2fa|mfa|cvv|card[ _-]?number|\bssn\b`)
	secretDescriptions = regexp.MustCompile(`(?i)password|passphrase|api[ _-]?key|private key|secret key|access token`)
)

// onElicit is the SDK's handler of a server's elicitation/create. The
// request is put to the person behind the call it belongs to: the call
// whose context it came in (2026-07-28's input requests), or else the one
// call in flight on the session; with none or several, it is declined.
func (s *server) onElicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	if req == nil || req.Params == nil {
		return &mcp.ElicitResult{Action: elicitDecline}, nil
	}
	f, ok := ctx.Value(inflightKey{}).(*inflight)
	if !ok {
		f = s.soleCall(req.Session)
	}
	if f == nil {
		s.log.Warn().Msg("MCP server asked for user input while no single call of it was in flight; declined")
		return &mcp.ElicitResult{Action: elicitDecline}, nil
	}
	// The question ends with the call at the latest.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(f.ctx, cancel)
	defer stop()
	return s.elicitFor(ctx, f.call, req.Params), nil
}

// inflightKey keys a call's inflight in the context of its request.
type inflightKey struct{}

// soleCall returns the one call in flight on the session sess, nil when
// there are none or several.
func (s *server) soleCall(sess *mcp.ClientSession) *inflight {
	s.mu.Lock()
	defer s.mu.Unlock()
	var found *inflight
	for _, f := range s.calls {
		if sess != nil && f.conn.session != sess {
			continue
		}
		if found != nil {
			return nil
		}
		found = f
	}
	return found
}

// elicitFor puts the request p to the person behind the call c and returns
// their answer: accepted content that matches the requested schema, or a
// decline.
func (s *server) elicitFor(ctx context.Context, c *toolkit.Call, p *mcp.ElicitParams) *mcp.ElicitResult {
	decline := &mcp.ElicitResult{Action: elicitDecline}
	if c == nil || c.Ask == nil || (p.Mode != "" && p.Mode != "form") {
		s.log.Warn().Str("mode", oneLine(p.Mode, 32)).Msg("MCP server asked for user input of a kind not passed on; declined")
		return decline
	}
	schema := []byte(`{"type":"object"}`)
	if p.RequestedSchema != nil {
		b, err := json.Marshal(p.RequestedSchema)
		if err != nil || len(b) > maxSchemaBytes {
			s.log.Warn().Int("bytes", len(b)).Msg("MCP server asked for user input with a schema that cannot be shown; declined")
			return decline
		}
		schema = b
	}
	sch, err := s.m.reg.Schemas.Compile(schema)
	if err != nil {
		s.log.Warn().Err(err).Msg("MCP server asked for user input with a schema that does not compile; declined")
		return decline
	}
	note := fmt.Sprintf("Asked by MCP server %q, not by tooldispatch: the answer goes to that server as it is.", s.name)
	if fields := secretFields(schema); len(fields) > 0 {
		note += fmt.Sprintf(" Warning: it asks for what looks like a secret (%s). Servers must not ask for secrets this way; "+
			"do not type a password, key or token here. Secrets go through store_secret, which keeps them encrypted and "+
			"sends them only to the origins you allow; decline this request.", strings.Join(fields, ", "))
	}
	q := toolkit.Question{
		Kind:   toolkit.QuestionElicit,
		Text:   capWith(strings.ToValidUTF8(c.Redact(p.Message), "\uFFFD"), maxElicitMessage, " [… cut at %s of %s]"),
		Schema: schema,
		Note:   note,
		Validate: func(a toolkit.Answer) error {
			_, err := elicitContent(sch, a.Text)
			return err
		},
	}
	a, err := c.Ask(ctx, q)
	switch {
	case err != nil:
		s.log.Info().Err(err).Str("call", c.ID).Msg("MCP server's request for user input got no answer; declined")
		return decline
	case a.Declined:
		return decline
	}
	content, err := elicitContent(sch, a.Text)
	if err != nil {
		return decline
	}
	return &mcp.ElicitResult{Action: elicitAccept, Content: content}
}

// elicitContent is an answer's text as the content of an accepted
// elicitation: a JSON object that matches the requested schema.
func elicitContent(sch *toolkit.Schema, text string) (map[string]any, error) {
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var content map[string]any
	if err := d.Decode(&content); err != nil || content == nil {
		return nil, errors.New(`the answer must be a JSON object of the requested fields, such as {"name": "…"}`)
	}
	if d.More() {
		return nil, errors.New("the answer must be one JSON object")
	}
	if err := sch.ValidateValue(content); err != nil {
		var ve *toolkit.ValidationError
		if errors.As(err, &ve) {
			msgs := make([]string, len(ve.Fields))
			for i, f := range ve.Fields {
				msgs[i] = f.Message
			}
			return nil, errors.New(strings.Join(msgs, "; "))
		}
		return nil, err
	}
	// The SDK's own check reads numbers as float64.
	var plain map[string]any
	if err := json.Unmarshal([]byte(text), &plain); err != nil {
		return nil, err
	}
	return plain, nil
}

// secretFields names the requested fields that look like a request for a
// secret: by name, title, description or format, or marked writeOnly.
func secretFields(schema []byte) []string {
	var s struct {
		Properties map[string]struct {
			Title       string `json:"title"`
			Description string `json:"description"`
			Format      string `json:"format"`
			WriteOnly   bool   `json:"writeOnly"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	var out []string
	for name, p := range s.Properties {
		if p.WriteOnly || p.Format == "password" || secretNames.MatchString(name) || secretNames.MatchString(p.Title) ||
			secretDescriptions.MatchString(p.Description) {
			out = append(out, fmt.Sprintf("%q", oneLine(name, 64)))
		}
	}
	sort.Strings(out)
	return out
}

// withInflight puts f in ctx, for the requests for input of its call.
func withInflight(ctx context.Context, f *inflight) context.Context {
	return context.WithValue(ctx, inflightKey{}, f)
}
