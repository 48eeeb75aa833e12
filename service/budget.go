package service

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// budgetRetryAfter is what a request refused for the budget is told to
// wait before trying again (Retry-After).
const budgetRetryAfter = 2 * time.Second

// overBudgetError: reading a request body would take more bytes than the
// in-flight budget of size bytes has free.
type overBudgetError struct{ size int64 }

func (e *overBudgetError) Error() string {
	return "service: the bytes of requests in flight are over the budget"
}

// budget bounds the bytes of request bodies in flight (Options.
// MaxInFlightBytes): a body's bytes are taken as they are read (all at once
// when its Content-Length is known) and given back when its request has
// been answered. A turn costs several times its body in memory while it is
// decoded, dispatched, committed and answered, so this bounds the memory of
// turns in flight. Nobody waits for the budget: a request that does not fit
// is refused at once (429, Retry-After). Safe for concurrent use.
type budget struct {
	size      int64             // immutable
	onUsed    func(inUse int64) // immutable; reports the bytes in use
	onRefused func()            // immutable; counts a refusal

	mu    sync.Mutex
	inUse int64 // guarded by mu
}

// take takes n bytes of the budget; false when fewer are free.
func (b *budget) take(n int64) bool {
	b.mu.Lock()
	if b.inUse+n > b.size {
		b.mu.Unlock()
		return false
	}
	b.inUse += n
	used := b.inUse
	b.mu.Unlock()
	b.onUsed(used)
	return true
}

// give gives n bytes back.
func (b *budget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.inUse -= n
	used := b.inUse
	b.mu.Unlock()
	b.onUsed(used)
}

// budgetedBody is a request body whose bytes are taken from the budget as
// they are read.
type budgetedBody struct {
	io.ReadCloser
	b       *budget
	limit   int64 // the body limit: what drop reads at most
	held    int64 // taken from the budget (all of Content-Length at once)
	read    int64
	refused bool
}

func (r *budgetedBody) Read(p []byte) (int, error) {
	if r.refused {
		return 0, &overBudgetError{size: r.b.size}
	}
	n, err := r.ReadCloser.Read(p)
	r.read += int64(n)
	if extra := r.read - r.held; extra > 0 {
		if !r.b.take(extra) {
			r.refused = true
			r.b.onRefused()
			drop(r.ReadCloser, r.limit-r.read)
			return 0, &overBudgetError{size: r.b.size}
		}
		r.held += extra
	}
	return n, err
}

// budgeted runs h with its request body's bytes taken from the budget,
// and gives them back once h has answered. A body whose Content-Length does
// not fit is refused before anything is read; one without is refused when
// a read would go over.
func (s *Server) budgeted(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body := &budgetedBody{ReadCloser: r.Body, b: s.budget, limit: s.opts.MaxBodyBytes}
		if n := r.ContentLength; n > 0 && n <= s.opts.MaxBodyBytes {
			if !s.budget.take(n) {
				s.budget.onRefused()
				drop(r.Body, n)
				writeError(w, overBudget(s.budget.size))
				return
			}
			body.held = n
		}
		defer func() { s.budget.give(body.held) }()
		r.Body = body
		h(w, r)
	}
}

// drop reads and discards up to n bytes of a refused body, a small buffer
// at a time, so that a client that sends its whole body before it reads
// the answer gets the 429 instead of a connection reset (net/http closes a
// connection whose request body was left unread).
func drop(body io.Reader, n int64) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, n))
}

// maxAnswerBytes bounds the body of a confirmation or an answer, which
// stay outside the budget: a reason or an answer's text.
const maxAnswerBytes = 1 << 20

// answerBodyBytes is the body limit of a confirmation or an answer.
func (s *Server) answerBodyBytes() int64 { return min(s.opts.MaxBodyBytes, maxAnswerBytes) }

// overBudget is the answer to a request the budget refused.
func overBudget(size int64) *apiError {
	e := errorf(http.StatusTooManyRequests, "too many bytes of turns in flight: the service takes at most %d bytes of request bodies at once; nothing ran: retry later", size)
	e.retryAfter = strconv.Itoa(int(budgetRetryAfter / time.Second))
	return e
}
