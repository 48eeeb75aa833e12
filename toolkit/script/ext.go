package script

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// errorBodyShown is how much of a failed response's body an error reports.
const errorBodyShown = 2 << 10

// NewExtTool builds the extension tool spec declares, named ext_<name>:
// each call POSTs the canonical arguments (Content-Type application/json)
// with the declared headers to spec.URL; a 2xx response's body is the
// result (cut at MaxOutput), any other status is an error quoting the start
// of the body. Redirects are not followed. Extension tools come only from
// the operator's configuration, so ReadOnly is honoured.
func NewExtTool(spec ExtSpec, logger zerolog.Logger) (toolkit.Tool, error) {
	if err := spec.Validate(); err != nil {
		return toolkit.Tool{}, err
	}
	schema, _ := schemaJSON(spec.Schema)
	c := &extCaller{
		name:    ExtPrefix + spec.Name,
		url:     spec.URL,
		headers: spec.Headers,
		timeout: effectiveTimeout(spec.Timeout),
		maxOut:  orDefault(spec.MaxOutput, DefaultMaxOutput),
		log:     logger,
		client: &http.Client{
			// One connection per call: nothing lingers between calls.
			Transport: &http.Transport{
				Proxy:                 http.ProxyFromEnvironment,
				DisableKeepAlives:     true,
				TLSHandshakeTimeout:   10 * time.Second,
				ResponseHeaderTimeout: 0,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	desc := spec.Description
	if desc == "" {
		desc = fmt.Sprintf("Calls the extension endpoint %s.", spec.Name)
	}
	return toolkit.Tool{
		Name:        c.name,
		Description: desc,
		Schema:      schema,
		Concurrent:  spec.Concurrent,
		ReadOnly:    spec.ReadOnly,
		Timeout:     spec.Timeout,
		Handler:     c.call,
		Source:      toolkit.SourceExt,
	}, nil
}

// extCaller runs the calls of one extension tool; safe for concurrent use.
type extCaller struct {
	// immutable after NewExtTool
	name    string
	url     string
	headers map[string]string
	timeout time.Duration
	maxOut  int
	client  *http.Client
	log     zerolog.Logger
}

func (c *extCaller) call(ctx context.Context, call *toolkit.Call) (toolkit.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	body := call.Args.Canonical
	if len(body) == 0 {
		body = []byte("{}")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return toolkit.Result{}, fmt.Errorf("%s: %w", c.name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tooldispatch")
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	began := time.Now()
	resp, err := c.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return toolkit.Result{}, fmt.Errorf("%s: no answer after %s: %w", c.name, time.Since(began).Round(time.Millisecond), ctx.Err())
		}
		return toolkit.Result{}, fmt.Errorf("%s: request failed: %w", c.name, err)
	}
	defer resp.Body.Close()
	read := c.maxOut + toolkit.MaxMarkerLen
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(read)+1))
	if err != nil {
		if ctx.Err() != nil {
			return toolkit.Result{}, fmt.Errorf("%s: reading the answer stopped after %s: %w", c.name, time.Since(began).Round(time.Millisecond), ctx.Err())
		}
		return toolkit.Result{}, fmt.Errorf("%s: reading the answer: %w", c.name, err)
	}
	c.log.Debug().Str("tool", c.name).Int("status", resp.StatusCode).Int("body_bytes", len(data)).
		Dur("elapsed", time.Since(began)).Msg("extension tool answered")
	// Redacted whole (or, for an answer longer than was read, its start
	// without an end that may begin a secret), then cut outside markers.
	text := call.Redact(string(data))
	cut := len(data) > read
	if cut {
		text = toolkit.RedactHead(call.Redactor, string(data))
	}
	if len(text) > c.maxOut {
		text, cut = text[:toolkit.SafeCut(text, c.maxOut)], true
	}

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		shown := text[:toolkit.SafeCut(text, errorBodyShown)]
		msg := fmt.Sprintf("%s: the endpoint answered HTTP %s", c.name, resp.Status)
		if len(shown) > 0 {
			msg += ":\n" + validText([]byte(shown), true)
		}
		return toolkit.Result{}, fmt.Errorf("%s", msg)
	}
	out := validText([]byte(text), true)
	if cut {
		out += fmt.Sprintf("\n[… answer cut at %d bytes …]", c.maxOut)
	}
	if out == "" {
		out = "(empty answer)"
	}
	return toolkit.Result{Content: out}, nil
}
