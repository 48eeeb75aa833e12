package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/tooldispatch/tooldispatch/messages"
)

// apiError is a failed request: the status code and the message the client
// reads. Messages name what was wrong with the request; they never carry a
// secret or a stack trace.
type apiError struct {
	code int
	msg  string
	// retryAfter, when set, is the Retry-After header (seconds).
	retryAfter string
}

func (e *apiError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) *apiError {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

// errorBody is the JSON body of every error response.
type errorBody struct {
	Error string `json:"error"`
}

var (
	jsonContentType = []string{"application/json; charset=utf-8"}
	noStore         = []string{"no-store"}
)

// writeJSON writes v as the JSON body of a response with code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	h := w.Header()
	h["Content-Type"] = jsonContentType // shared, see securityHeaders
	h["Cache-Control"] = noStore
	w.WriteHeader(code)
	// Only values built here: encoding cannot fail, and a write error
	// means the client went away.
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes an error response.
func writeError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter != "" {
		w.Header().Set("Retry-After", e.retryAfter)
	}
	writeJSON(w, e.code, errorBody{Error: e.msg})
}

// decodeJSON reads the request body, which must be one JSON object of
// application/json no larger than limit, into v. Unknown fields are refused.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) *apiError {
	if e := checkJSONType(r); e != nil {
		return e
	}
	body := &countingReader{r: http.MaxBytesReader(w, r.Body, limit)}
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, dec.InputOffset(), body.n, limit)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return jsonError(err, dec.InputOffset(), body.n, limit)
		}
		return errorf(http.StatusBadRequest, "invalid JSON at byte offset %d: data after the JSON object", dec.InputOffset())
	}
	return nil
}

// checkJSONType refuses a body that is not declared as JSON, even one that
// parses as JSON: a web page can send a form or text/plain body to any
// address without asking (no CORS preflight), but not application/json,
// so this keeps other sites' pages from posting to the API, the token-less
// loopback service included.
func checkJSONType(r *http.Request) *apiError {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return errorf(http.StatusUnsupportedMediaType, "the request body must be JSON: set Content-Type: application/json (curl: -H 'Content-Type: application/json')")
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return errorf(http.StatusUnsupportedMediaType, "the request body must be JSON: set Content-Type: application/json (curl: -H 'Content-Type: application/json'; -d alone sends a form), not %q", messages.ClipText(ct, 100))
	}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// jsonError turns a decoding error into a client error that says where:
// offsets count bytes from 0 and point at the offending byte (syntax and
// type errors), just after the offending value (unknown fields), or at the
// end of a body that stops inside a value (read bytes).
func jsonError(err error, offset, read, limit int64) *apiError {
	var mbe *http.MaxBytesError
	var ob *overBudgetError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &ob):
		return overBudget(ob.size)
	case errors.As(err, &mbe):
		return errorf(http.StatusRequestEntityTooLarge, "the request body is larger than %d bytes", limit)
	case errors.As(err, &se):
		return errorf(http.StatusBadRequest, "invalid JSON at byte offset %d: %s", max(se.Offset-1, 0), se.Error())
	case errors.As(err, &te):
		if te.Field == "" {
			return errorf(http.StatusBadRequest, "invalid request at byte offset %d: the body must be a JSON object, not a JSON %s", max(te.Offset-1, 0), te.Value)
		}
		return errorf(http.StatusBadRequest, "invalid request at byte offset %d: field %s must be %s, not a JSON %s", max(te.Offset-1, 0), te.Field, messages.JSONTypeName(te.Type.Kind()), te.Value)
	case errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, "the request body is empty: expected a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, "invalid JSON at byte offset %d: the body ends inside a value", read)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errorf(http.StatusBadRequest, "invalid request at byte offset %d: unknown field %s", offset, strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return errorf(http.StatusBadRequest, "invalid request body at byte offset %d", offset)
}
