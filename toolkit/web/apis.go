package web

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

const publicAPIListSchema = `{
  "type": "object",
  "properties": {
    "query": {"type": "string", "maxLength": 200, "description": "Keywords to match against the APIs' names, descriptions and URLs (default: list all)."}
  },
  "additionalProperties": false
}`

func (w *Web) publicAPIListTool() toolkit.Tool {
	return toolkit.Tool{
		Name: PublicAPIListName,
		Description: "List the APIs the operator set up for you to call with http_request: base URL, what each is for, " +
			"its documentation, and which header carries its credential (and whether that secret is stored).",
		Schema:     json.RawMessage(publicAPIListSchema),
		Concurrent: true,
		ReadOnly:   true,
		Timeout:    apiListTimeout,
		Handler:    w.publicAPIList,
	}
}

func (w *Web) publicAPIList(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	if len(w.cfg.APIs) == 0 {
		return toolkit.Result{Content: "No APIs are set up. The operator lists them in the configuration (apis: name, base_url, " +
			"description, docs_url, auth_header). You can still call any public URL with http_request.\n"}, nil
	}
	terms := strings.Fields(strings.ToLower(c.Args.String("query")))
	var picked []API
	for _, a := range w.cfg.APIs {
		hay := strings.ToLower(a.Name + " " + a.Description + " " + a.BaseURL + " " + a.DocsURL)
		match := true
		for _, t := range terms {
			if !strings.Contains(hay, t) {
				match = false
				break
			}
		}
		if match {
			picked = append(picked, a)
		}
	}
	var b strings.Builder
	if len(picked) == 0 {
		fmt.Fprintf(&b, "No API matches %q. The APIs set up are: ", c.Args.String("query"))
		names := make([]string, len(w.cfg.APIs))
		for i, a := range w.cfg.APIs {
			names[i] = a.Name
		}
		b.WriteString(strings.Join(names, ", ") + ".\n")
		return toolkit.Result{Content: b.String()}, nil
	}
	fmt.Fprintf(&b, "APIs to call with http_request (%d):\n", len(picked))
	for _, a := range picked {
		fmt.Fprintf(&b, "\n- %s\n  base_url: %s\n", a.Name, a.BaseURL)
		if a.Description != "" {
			fmt.Fprintf(&b, "  description: %s\n", a.Description)
		}
		if a.DocsURL != "" {
			fmt.Fprintf(&b, "  docs: %s\n", a.DocsURL)
		}
		if a.AuthHeader == "" {
			b.WriteString("  auth: none\n")
			continue
		}
		value := a.AuthValue
		if value == "" {
			value = secrets.Reference(defaultSecretName(a.Name))
		}
		fmt.Fprintf(&b, "  auth: header %q: %q\n", a.AuthHeader, value)
		if origins, err := a.secretOrigins(); err == nil {
			fmt.Fprintf(&b, "  its secret is sent only to: %s\n", strings.Join(origins, ", "))
		}
		for _, name := range secrets.References(value) {
			stored := false
			if w.secrets != nil {
				stored, _ = w.secrets.Has(ctx, name)
			}
			if stored {
				fmt.Fprintf(&b, "  secret %s: stored\n", name)
			} else {
				fmt.Fprintf(&b, "  secret %s: not stored yet; ask the user to store it with store_secret\n", name)
			}
		}
	}
	return toolkit.Result{Content: b.String()}, nil
}

// defaultSecretName makes a secret name from an API's name: "GitHub API"
// gives GITHUB_API_KEY.
func defaultSecretName(api string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(api) {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(r)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "_") {
			b.WriteByte('_')
		}
	}
	name := strings.TrimSuffix(b.String(), "_")
	if name == "" || unicode.IsDigit(rune(name[0])) {
		name = "API_" + name
	}
	return strings.TrimSuffix(name, "_") + "_KEY"
}
