package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioTransport runs a stdio server as the SDK's CommandTransport does
// (newline-delimited JSON on stdin and stdout; closing stdin, then SIGTERM,
// then SIGKILL to stop it), but reads the server's output through a
// meteredReader, which bounds each message and the flood budget.
type stdioTransport struct {
	cmd   *exec.Cmd
	meter *meter
	// input is the server's input once connected.
	input *stdinCloser
}

// Connect starts the command and connects to it over its stdin and stdout.
func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	t.input = &stdinCloser{WriteCloser: stdin, cmd: t.cmd}
	io := &mcp.IOTransport{
		// The connection is closed through stdin; stdout is closed when
		// the process is reaped.
		Reader: io.NopCloser(&meteredReader{r: stdout, meter: t.meter}),
		Writer: t.input,
		// The meter cuts a longer line first, as a broken bound.
		MaxLineLength: maxMessageBytes + 1,
	}
	return io.Connect(ctx)
}

// meteredReader counts the lines (messages) and bytes a stdio server sends
// against the meter, and fails the read of a line over maxMessageBytes.
type meteredReader struct {
	r     io.Reader
	meter *meter
	line  int // bytes of the current line so far
}

func (m *meteredReader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if n == 0 {
		return n, err
	}
	chunk := p[:n]
	lines := bytes.Count(chunk, []byte{'\n'})
	if last := bytes.LastIndexByte(chunk, '\n'); last >= 0 {
		first := bytes.IndexByte(chunk, '\n')
		if m.line+first > maxMessageBytes {
			return 0, overLong()
		}
		m.line = n - last - 1
	} else {
		m.line += n
	}
	if m.line > maxMessageBytes {
		return 0, overLong()
	}
	if merr := m.meter.add(lines, n); merr != nil {
		return 0, merr
	}
	return n, err
}

// overLong is the error of a message over maxMessageBytes: the session
// ends (as the SDK ends it for a stdio line or an event over the same
// size), and the server is restarted like one that crashed.
func overLong() error {
	return fmt.Errorf("the server sent a message of more than %s: %w", sizeText(maxMessageBytes), ErrMessageTooLong)
}

// stdinCloser is a stdio server's input. It says how long a write has
// been blocked (a server that reads nothing more blocks them once the pipe
// is full). Closing it stops the server: it closes stdin and waits
// terminateDuration for the server to exit, then sends SIGTERM and waits
// again, then SIGKILL.
type stdinCloser struct {
	io.WriteCloser
	cmd *exec.Cmd
	// writing is when the write under way began (Unix nanoseconds), 0
	// when none is (the SDK writes one message at a time).
	writing atomic.Int64
	once    sync.Once
	err     error
}

// Write writes p to the server's input.
func (w *stdinCloser) Write(p []byte) (int, error) {
	w.writing.Store(time.Now().UnixNano())
	defer w.writing.Store(0)
	return w.WriteCloser.Write(p)
}

// blocked is how long the write under way has waited, 0 when none is.
func (w *stdinCloser) blocked() time.Duration {
	began := w.writing.Load()
	if began == 0 {
		return 0
	}
	return time.Since(time.Unix(0, began))
}

// Close stops the server and reaps it; it is idempotent.
func (w *stdinCloser) Close() error {
	w.once.Do(func() { w.err = w.stop() })
	return w.err
}

func (w *stdinCloser) stop() error {
	if err := w.WriteCloser.Close(); err != nil {
		return fmt.Errorf("closing stdin: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- w.cmd.Wait() }()
	wait := func() (error, bool) {
		t := time.NewTimer(terminateDuration)
		defer t.Stop()
		select {
		case err := <-exited:
			return err, true
		case <-t.C:
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if w.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := w.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("the server did not exit after SIGKILL")
}

// boundedTransport is the HTTP transport of a Streamable HTTP server: it
// counts every response against the meter, bounds a JSON body and each
// server-sent event to maxMessageBytes, and cancels every request when ctx
// ends (the session is stopped by force).
type boundedTransport struct {
	base  http.RoundTripper
	meter *meter
	ctx   context.Context
}

// RoundTrip sends req and bounds the response's body.
func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(t.ctx, cancel)
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		stop()
		cancel()
		return resp, err
	}
	done := func() {
		stop()
		cancel()
	}
	body := &releasingBody{ReadCloser: resp.Body, done: done}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		resp.Body = &eventBody{releasingBody: body, meter: t.meter}
	} else {
		resp.Body = &limitedBody{releasingBody: body, meter: t.meter}
	}
	return resp, nil
}

// limitedBody is a response body holding one message: it fails the read
// past maxMessageBytes.
type limitedBody struct {
	*releasingBody
	meter   *meter
	read    int
	counted bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n == 0 {
		return n, err
	}
	b.read += n
	if b.read > maxMessageBytes {
		return 0, overLong()
	}
	messages := 0
	if !b.counted {
		messages, b.counted = 1, true
	}
	if merr := b.meter.add(messages, n); merr != nil {
		return 0, merr
	}
	return n, err
}

// eventBody is a stream of server-sent events: it counts each event (ended
// by an empty line) as a message, and fails the read of an event past
// maxMessageBytes.
type eventBody struct {
	*releasingBody
	meter *meter
	event int  // bytes of the current event so far
	line  int  // bytes of the current line so far, without its end
	cr    bool // the last byte was '\r'
}

func (b *eventBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	events := 0
	for _, c := range p[:n] {
		b.event++
		switch {
		case c == '\n' && b.cr:
			// The end of a "\r\n" line was counted at '\r'.
		case c == '\n' || c == '\r':
			if b.line == 0 {
				events++
				b.event = 0
			}
			b.line = 0
		default:
			b.line++
		}
		b.cr = c == '\r'
		if b.event > maxMessageBytes {
			return 0, overLong()
		}
	}
	if n > 0 {
		if merr := b.meter.add(events, n); merr != nil {
			return 0, merr
		}
	}
	return n, err
}

// releasingBody is a response body that releases its request (done) when
// it is closed.
type releasingBody struct {
	io.ReadCloser
	done func()
	once sync.Once
}

// Close closes the body and releases the request.
func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}
