package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tooldispatch/tooldispatch/messages"
)

// Timings of event streams.
const (
	// keepAliveInterval is how often an idle stream gets a comment, so
	// proxies and clients do not take it for dead.
	keepAliveInterval = 15 * time.Second
	// sseWriteTimeout bounds one write to a stream: a client that stops
	// reading does not hold its handler forever.
	sseWriteTimeout = 30 * time.Second
	// sseRetryMillis is the reconnection delay streams suggest to clients.
	sseRetryMillis = 2000
)

// sseStream writes server-sent events. After the first failed write it
// writes nothing more and reports that error. Not safe for concurrent use.
type sseStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

// startSSE sends the headers of an event stream.
func startSSE(w http.ResponseWriter) *sseStream {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseStream{w: w, rc: http.NewResponseController(w)}
	s.write("retry: " + strconv.Itoa(sseRetryMillis) + "\n\n")
	return s
}

// event writes a dispatcher event: id (its sequence number), event (its
// kind) and data (its JSON). A lagged notice carries no id, so a client
// that reconnects resumes after the last event it got.
func (s *sseStream) event(ev *messages.Event) error {
	id := ""
	if ev.GetKind() != EventLagged && ev.GetSeq() != 0 {
		id = strconv.FormatUint(ev.GetSeq(), 10)
	}
	return s.send(id, ev.GetKind(), eventJSON(ev))
}

// send writes one event with data v as JSON.
func (s *sseStream) send(id, kind string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding event %s: %w", kind, err)
	}
	var b strings.Builder
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("event: " + kind + "\n")
	// JSON text has no raw newlines: one data line.
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	return s.write(b.String())
}

// comment writes a comment line (keep-alive).
func (s *sseStream) comment(text string) error {
	return s.write(": " + text + "\n\n")
}

func (s *sseStream) write(text string) error {
	if s.err != nil {
		return s.err
	}
	if err := s.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = err
		return err
	}
	if _, err := s.w.Write([]byte(text)); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
	}
	return s.err
}

// finish clears the write deadline, so the connection can serve another
// request.
func (s *sseStream) finish() {
	_ = s.rc.SetWriteDeadline(time.Time{}) // not supported or the client went away: nothing to clear
}

// wantsEventStream reports whether the client asked for server-sent events.
func wantsEventStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// lastEventID reads where a reconnecting client left off: the
// Last-Event-ID header, or the after query parameter for clients that
// cannot set headers. Zero means a new subscription.
func lastEventID(r *http.Request) (uint64, *apiError) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, errorf(http.StatusBadRequest, "Last-Event-ID must be an event's sequence number, not %q", messages.ClipText(v, 40))
	}
	return n, nil
}
