package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/toolkit"
)

// response is a response read within the policy.
type response struct {
	URL       *url.URL // after redirects
	Status    int
	Header    http.Header
	Body      []byte
	Truncated bool // the body was longer than the cap; the rest was not read
}

// statusLine returns e.g. "HTTP 404 Not Found".
func statusLine(code int) string {
	if t := http.StatusText(code); t != "" {
		return fmt.Sprintf("HTTP %d %s", code, t)
	}
	return fmt.Sprintf("HTTP %d", code)
}

// do sends req within the policy, bounded by timeout, and hands the
// response to read before closing its body. Errors are described without
// the request's URL (which may hold resolved secrets); when ctx ends first,
// do returns ctx.Err().
func (w *Web) do(ctx context.Context, req *http.Request, timeout time.Duration, read func(*http.Response) error) error {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req = req.WithContext(rctx)
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", w.policy.UserAgent)
	}
	start := time.Now()
	resp, err := w.client.Do(req)
	if err != nil {
		return requestError(ctx, err, timeout)
	}
	defer resp.Body.Close()
	if err := read(resp); err != nil {
		return requestError(ctx, err, timeout)
	}
	w.log.Debug().Str("host", redact(w.redactor, req.URL.Host)).Str("method", req.Method).Int("status", resp.StatusCode).
		Dur("took", time.Since(start)).Msg("request")
	return nil
}

// fetch sends req and reads at most limit bytes of the body.
func (w *Web) fetch(ctx context.Context, req *http.Request, limit int64) (*response, error) {
	var out *response
	err := w.do(ctx, req, w.policy.Timeout, func(resp *http.Response) error {
		body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err != nil {
			return err
		}
		out = &response{URL: resp.Request.URL, Status: resp.StatusCode, Header: resp.Header, Body: body}
		if int64(len(body)) > limit {
			out.Body, out.Truncated = body[:limit], true
		}
		return nil
	})
	return out, err
}

// requestError describes a failed request in words for the model, without
// its URL.
func requestError(ctx context.Context, err error, timeout time.Duration) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var be *BlockedError
	var oe *net.OpError
	if errors.As(err, &oe) && errors.As(err, &be) {
		return be // refused by the dial check: the policy's words suffice
	}
	if errorsIsAny(err, ErrBlockedAddress, ErrScheme, ErrTooManyRedirects) {
		return err
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("the request timed out after %s", timeout)
	}
	var tooLarge *tooLargeError
	if errors.As(err, &tooLarge) {
		return err
	}
	return fmt.Errorf("the request failed: %s", strings.TrimPrefix(err.Error(), "net/http: "))
}

// tooLargeError: a body is larger than a cap that does not allow cutting
// it (download_file).
type tooLargeError struct {
	limit int64
	what  string
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than the %s limit", e.what, toolkit.HumanSize(e.limit))
}
