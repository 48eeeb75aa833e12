package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/tooldispatch/tooldispatch/toolkit"
	"github.com/tooldispatch/tooldispatch/toolkit/secrets"
)

// Limits of http_request.
const (
	defaultResponseChars = 20_000
	maxResponseChars     = 200_000
	maxRequestBody       = 1 << 20
)

// methods http_request accepts.
var methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

const httpRequestSchema = `{
  "type": "object",
  "properties": {
    "method": {"type": "string", "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], "description": "HTTP method (default GET). GET and HEAD without a body or method-override header run without approval; everything else needs the user's approval."},
    "url": {"type": "string", "minLength": 1, "maxLength": 8192, "description": "The http(s) URL. May contain ${secret:NAME} references (put into the URL query-escaped)."},
    "headers": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 50, "description": "Request headers. Values may contain ${secret:NAME}, e.g. {\"Authorization\": \"Bearer ${secret:GITHUB_TOKEN}\"}."},
    "body": {"type": "string", "maxLength": 1048576, "description": "Request body (e.g. JSON text; set Content-Type in headers). May contain ${secret:NAME}."},
    "max_chars": {"type": "integer", "minimum": 100, "maximum": 200000, "description": "Most characters of the response body to return (default 20000)."}
  },
  "required": ["url"],
  "additionalProperties": false
}`

func (w *Web) httpRequestTool() toolkit.Tool {
	return toolkit.Tool{
		Name: HTTPRequestName,
		Description: "Send an HTTP request (any method, headers, body) and return the status, main headers and body. " +
			"Reference stored credentials as ${secret:NAME} in the url path or query, headers or body; they are filled in at call " +
			"time, never shown, and only sent to the origins each secret is bound to. GET and HEAD without a body or " +
			"method-override header are read-only; anything else needs the user's approval. " +
			"GET results without credentials are cached for 30 minutes in this session. For reading web pages use fetch_page; " +
			"for the APIs the operator set up, see public_api_list.",
		Schema:       json.RawMessage(httpRequestSchema),
		Concurrent:   true,
		ReadOnlyFunc: httpRequestReadOnly,
		Timeout:      w.policy.Timeout + toolGrace,
		Handler:      w.httpRequest,
	}
}

// methodOverrideHeaders make many servers treat a request as another
// method (a GET as a DELETE); names in lower case.
var methodOverrideHeaders = []string{"x-http-method-override", "x-http-method", "x-method-override"}

// httpRequestReadOnly: a GET (the default) or HEAD is read-only when it
// carries no body and no method-override header; anything else needs
// approval.
func httpRequestReadOnly(a toolkit.Args) bool {
	switch requestMethod(a) {
	case http.MethodGet, http.MethodHead:
	default:
		return false
	}
	if b, ok := a.Value["body"]; ok && b != nil && b != "" {
		return false
	}
	if raw, ok := a.Value["headers"]; ok && raw != nil {
		hs, ok := raw.(map[string]any)
		if !ok {
			return false
		}
		for k := range hs {
			if slices.Contains(methodOverrideHeaders, strings.ToLower(strings.TrimSpace(k))) {
				return false
			}
		}
	}
	return true
}

func requestMethod(a toolkit.Args) string {
	m := strings.ToUpper(strings.TrimSpace(a.String("method")))
	if m == "" {
		return http.MethodGet
	}
	return m
}

// credentialHeaders are header names that carry credentials; a request
// with one is never cached.
var credentialHeaders = []string{
	"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "apikey", "x-auth-token",
	"x-access-token", "private-token", "x-csrf-token", "x-xsrf-token",
}

// credentialWords in a header or query parameter name mark it as carrying
// a credential.
var credentialWords = []string{"auth", "token", "secret", "key", "password", "passwd", "session", "signature", "sig", "credential", "cookie"}

func credentialName(name string) bool {
	n := strings.ToLower(name)
	if slices.Contains(credentialHeaders, n) {
		return true
	}
	for _, w := range credentialWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// carriesCredentials reports whether a request holds a credential: a
// secret reference anywhere, user information in the URL, a credential
// header, or a credential-like query parameter. rawURL is the URL as
// written and u its parsed form.
func carriesCredentials(rawURL string, u *url.URL, headers map[string]string, body string) bool {
	if secrets.HasReference(rawURL) || secrets.HasReference(body) || u.User != nil {
		return true
	}
	for k, v := range headers {
		if credentialName(k) || secrets.HasReference(v) {
			return true
		}
	}
	for k := range u.Query() {
		if credentialName(k) {
			return true
		}
	}
	return false
}

// httpRequestKey is the cache key of a GET: per session, by the canonical
// arguments.
func httpRequestKey(session string, canonicalArgs []byte) string {
	return HTTPRequestName + "|" + strconv.Quote(session) + "|" + string(canonicalArgs)
}

// outcome is what one execution of http_request produced.
type outcome struct {
	content string
	// cacheable: a 2xx GET answer the server allows storing.
	cacheable bool
	fetched   time.Time
}

func (w *Web) httpRequest(ctx context.Context, c *toolkit.Call) (toolkit.Result, error) {
	r := w.redactorFor(c)
	res, err := w.httpRequestRun(ctx, c, r)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		err = errors.New(redact(r, err.Error()))
	}
	res.Content = redact(r, res.Content)
	if res.Cache != nil {
		res.Cache.Value = []byte(redact(r, string(res.Cache.Value)))
	}
	return res, err
}

func (w *Web) httpRequestRun(ctx context.Context, c *toolkit.Call, r Redactor) (toolkit.Result, error) {
	method := requestMethod(c.Args)
	if !slices.Contains(methods, method) {
		return toolkit.Result{}, fmt.Errorf("method %q is not supported (use one of %s)", method, strings.Join(methods, ", "))
	}
	rawURL := strings.TrimSpace(c.Args.String("url"))
	headers, err := headerArgs(c.Args)
	if err != nil {
		return toolkit.Result{}, err
	}
	body := c.Args.String("body")
	if len(body) > maxRequestBody {
		return toolkit.Result{}, fmt.Errorf("body is %s, more than the %s allowed", toolkit.HumanSize(int64(len(body))), toolkit.HumanSize(maxRequestBody))
	}
	limit := int(min(max(c.Args.Int("max_chars", defaultResponseChars), 100), maxResponseChars))

	// The URL as written (secret references unresolved) is checked and
	// named in messages; the resolved one is only sent.
	template, err := url.Parse(rawURL)
	if err != nil {
		return toolkit.Result{}, fmt.Errorf("url %q is not a valid URL", rawURL)
	}
	creds := carriesCredentials(rawURL, template, headers, body)
	cacheable := method == http.MethodGet && !creds
	key := httpRequestKey(c.Session, c.Args.Canonical)

	if cacheable {
		if b, ok := w.cacheGet(ctx, HTTPRequestName, key); ok {
			// A hit is never stored again: no Result.Cache.
			return toolkit.Result{Content: "(cached response)\n" + string(b)}, nil
		}
	}

	req, err := w.buildRequest(ctx, method, rawURL, headers, body)
	if err != nil {
		return toolkit.Result{}, err
	}
	run := func(ctx context.Context) (any, error) {
		if creds {
			ctx = withSameOriginRedirects(ctx)
		}
		return w.exchangeRequest(ctx, req.Clone(ctx), method, limit, r)
	}
	var v any
	if cacheable {
		v, err = w.share(ctx, key, w.policy.Timeout+toolGrace, run)
	} else {
		v, err = run(ctx)
	}
	if err != nil {
		return toolkit.Result{}, err
	}
	out := v.(*outcome)
	res := toolkit.Result{Content: out.content}
	if cacheable && out.cacheable && w.cache != nil {
		res.Cache = &toolkit.CacheEntry{Key: key, Value: []byte(out.content), Expires: out.fetched.Add(CacheTTL)}
	}
	return res, nil
}

// headerArgs returns the headers argument, checked: valid names, values
// without line breaks. Messages name the header, never its value.
func headerArgs(a toolkit.Args) (map[string]string, error) {
	raw, ok := a.Value["headers"]
	if !ok || raw == nil {
		return nil, nil
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return nil, errors.New("headers must be an object of header names to string values")
	}
	out := make(map[string]string, len(obj))
	for k, v := range obj {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("header %q must have a string value", k)
		}
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, fmt.Errorf("header name %q is not valid", k)
		}
		if !httpguts.ValidHeaderFieldValue(s) {
			return nil, fmt.Errorf("the value of header %q holds a line break or a control character", k)
		}
		out[k] = s
	}
	return out, nil
}

// buildRequest resolves secret references and builds the request. Every
// secret is resolved for the origin of the URL as written, whose scheme,
// user and host may hold no reference, so a secret is refused before
// anything is sent unless it is bound to that origin. The origin, the
// policy's checks and the request all use the URL's host in its one form
// (Policy.Target), the host that is dialled.
func (w *Web) buildRequest(ctx context.Context, method, rawURL string, headers map[string]string, body string) (*http.Request, error) {
	template, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("url %q is not a valid URL", rawURL)
	}
	if template.Scheme == "" && template.Host == "" {
		return nil, fmt.Errorf("url %q has no scheme and host; write it in full, e.g. https://…", rawURL)
	}
	if referencedInAuthority(template) {
		return nil, fmt.Errorf("url %q: a ${secret:…} reference may only be in the path or query of a URL, never in its scheme, user or host", rawURL)
	}
	if template, err = w.policy.Target(template); err != nil {
		return nil, err
	}
	origin, err := secrets.OriginOf(template)
	if err != nil {
		return nil, fmt.Errorf("url %q: %w", rawURL, err)
	}
	resolvedURL, inURL, err := w.secrets.ResolveEscaped(ctx, origin, rawURL, url.QueryEscape)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(resolvedURL)
	if err != nil {
		return nil, fmt.Errorf("url %q is not a valid URL once its secrets are filled in", rawURL)
	}
	if u, err = w.policy.Target(u); err != nil {
		return nil, err
	}
	if o, err := secrets.OriginOf(u); err != nil || o != origin {
		// Values are query-escaped, so they cannot reach the authority;
		// this guards the rule rather than a known path.
		return nil, fmt.Errorf("url %q: filling in its secrets would change where it goes; refusing", rawURL)
	}
	resolvedBody, inBody, err := w.secrets.Resolve(ctx, origin, body)
	if err != nil {
		return nil, err
	}
	var rd *strings.Reader
	if body != "" {
		rd = strings.NewReader(resolvedBody)
	}
	var req *http.Request
	if rd != nil {
		req, err = http.NewRequest(method, u.String(), rd)
	} else {
		req, err = http.NewRequest(method, u.String(), nil)
	}
	if err != nil {
		return nil, fmt.Errorf("url %q: cannot build the request", rawURL)
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	slices.Sort(names)
	bearsSecret := len(inURL) > 0 || len(inBody) > 0
	values := make([]string, len(names))
	for i, k := range names {
		v, used, err := w.secrets.Resolve(ctx, origin, headers[k])
		if err != nil {
			return nil, fmt.Errorf("header %q: %w", k, err)
		}
		values[i], bearsSecret = v, bearsSecret || len(used) > 0
	}
	for i, k := range names {
		v := values[i]
		if bearsSecret && forwardingHeader(k) {
			return nil, fmt.Errorf("a request that carries a secret may not set the forwarding header %q: a proxy in front of %s could "+
				"route it, and the secret, by that header to another host; leave it out", k, u.Host)
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return nil, fmt.Errorf("header %q: a secret it references holds a line break or a control character", k)
		}
		if strings.EqualFold(k, "Host") {
			if !namesHost(v, u) {
				return nil, fmt.Errorf("a Host header may only name the URL's host %s (it is %q): it would send the request, "+
					"and any secret in it, to another virtual host behind the same address; put the host you mean in the URL", u.Host, headers[k])
			}
			continue // the URL's host is sent
		}
		req.Header.Add(k, v)
	}
	if body != "" && req.Header.Get("Content-Type") == "" {
		ct := "text/plain; charset=utf-8"
		if json.Valid([]byte(resolvedBody)) {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	return req, nil
}

// forwardingHeader reports whether a header is one that proxies route or
// rewrite requests by, as a virtual host routes by Host.
func forwardingHeader(name string) bool {
	switch n := strings.ToLower(name); n {
	case "forwarded", "x-original-host", "x-original-url", "x-rewrite-url", "x-host", "x-http-host-override", "x-forwarded":
		return true
	default:
		return strings.HasPrefix(n, "x-forwarded-")
	}
}

// namesHost reports whether a Host header value names u's host and port
// (explicit or the scheme's default), both in their one form.
func namesHost(value string, u *url.URL) bool {
	h, err := url.Parse(u.Scheme + "://" + strings.TrimSpace(value))
	if err != nil || h.Host != strings.TrimSpace(value) || h.User != nil {
		return false
	}
	a, errA := secrets.OriginOf(h)
	b, errB := secrets.OriginOf(u)
	return errA == nil && errB == nil && a == b
}

// referencedInAuthority reports whether a secret reference is in u's
// scheme, user information or host, where it would decide (or be sent to)
// the destination itself.
func referencedInAuthority(u *url.URL) bool {
	if secrets.HasReference(u.Scheme) || secrets.HasReference(u.Opaque) || secrets.HasReference(u.Host) {
		return true
	}
	if u.User != nil {
		p, _ := u.User.Password()
		return secrets.HasReference(u.User.Username()) || secrets.HasReference(p)
	}
	return false
}

// shownHeaders are the response headers http_request shows (HEAD shows
// all but cookies).
var shownHeaders = []string{
	"Content-Type", "Content-Length", "Content-Disposition", "Location", "Last-Modified", "ETag",
	"Cache-Control", "Retry-After", "Link", "WWW-Authenticate",
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
}

// exchangeRequest sends req and describes the response; the body is
// redacted by r before it is cut.
func (w *Web) exchangeRequest(ctx context.Context, req *http.Request, method string, limit int, r Redactor) (*outcome, error) {
	resp, err := w.fetch(ctx, req, w.policy.MaxBytes)
	if err != nil {
		return nil, err
	}
	if resp.Status >= 400 {
		return nil, statusError(ctx, resp, "reference a stored secret in a header, e.g. \"Authorization\": \"Bearer ${secret:NAME}\" "+
			"(the user stores one with store_secret), and check that it is the right one for this API", apiExcerptChars, r)
	}
	var b strings.Builder
	b.WriteString(statusLine(resp.Status) + "\n")
	if method == http.MethodHead {
		writeAllHeaders(&b, resp.Header)
	} else {
		for _, h := range shownHeaders {
			for _, v := range resp.Header.Values(h) {
				fmt.Fprintf(&b, "%s: %s\n", h, v)
			}
		}
		if n := len(resp.Header.Values("Set-Cookie")); n > 0 {
			fmt.Fprintf(&b, "Set-Cookie: (%d cookies, not shown)\n", n)
		}
	}
	if method != http.MethodHead {
		b.WriteString("\n")
		writeBody(&b, resp, limit, w.policy.MaxBytes, r)
	}
	cc := strings.ToLower(resp.Header.Get("Cache-Control"))
	return &outcome{
		content:   b.String(),
		cacheable: resp.Status < 300 && !strings.Contains(cc, "no-store") && len(resp.Header.Values("Set-Cookie")) == 0,
		fetched:   w.now(),
	}, nil
}

func writeAllHeaders(b *strings.Builder, h http.Header) {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if strings.EqualFold(k, "Set-Cookie") {
			fmt.Fprintf(b, "Set-Cookie: (%d cookies, not shown)\n", len(h[k]))
			continue
		}
		for _, v := range h[k] {
			fmt.Fprintf(b, "%s: %s\n", k, v)
		}
	}
}

// writeBody writes a response body as text, redacted by r, then cut at
// limit characters outside every redaction marker, or says what it is when
// it is not text.
func writeBody(b *strings.Builder, resp *response, limit int, maxBytes int64, r Redactor) {
	ct := resp.Header.Get("Content-Type")
	mt := mediaType(ct, resp.Body)
	if len(resp.Body) == 0 {
		b.WriteString("(empty body)\n")
		return
	}
	var text string
	switch {
	case isText(mt) || isHTML(mt):
		text = string(decodeText(resp.Body, ct))
	case utf8.Valid(resp.Body):
		text = string(resp.Body)
	default:
		fmt.Fprintf(b, "(binary body: %s of %s; save it with download_file)\n", toolkit.HumanSize(int64(len(resp.Body))), mt)
		return
	}
	// Redacted whole (a body longer than the response limit as the head
	// of a longer text), then cut: a cut never leaves part of a secret.
	text = redactText(r, text, resp.Truncated)
	n := runeLen(text)
	shown := n
	if n > limit {
		text = text[:toolkit.SafeCut(text, runeOffset(text, limit))]
		shown = runeLen(text)
	}
	b.WriteString(text)
	if !strings.HasSuffix(text, "\n") {
		b.WriteString("\n")
	}
	switch {
	case n > limit:
		fmt.Fprintf(b, "[body cut at %d of %d characters; raise max_chars to see more]\n", shown, n)
	case resp.Truncated:
		fmt.Fprintf(b, "[body cut at the %s response limit]\n", toolkit.HumanSize(maxBytes))
	}
	if n > limit && resp.Truncated {
		fmt.Fprintf(b, "[the response is also larger than the %s response limit]\n", toolkit.HumanSize(maxBytes))
	}
}
