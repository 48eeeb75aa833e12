package mcp

import (
	"bytes"
	"strings"
	"sync"

	"github.com/rs/zerolog"
)

// maxStderrLine is the longest stderr line logged as one record.
const maxStderrLine = 4 << 10

// lineLogger writes a stdio server's stderr to the logger at debug level,
// one record per line; it never reaches our stdout or stderr. Safe for
// concurrent use (os/exec's copier writes, cleanup flushes).
type lineLogger struct {
	log zerolog.Logger // immutable

	mu  sync.Mutex
	buf []byte // guarded by mu
}

// Write logs each complete line of p and keeps the rest; it never fails.
func (w *lineLogger) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.buf = append(w.buf, p...)
			for len(w.buf) >= maxStderrLine {
				w.emit(w.buf[:maxStderrLine])
				w.buf = append(w.buf[:0], w.buf[maxStderrLine:]...)
			}
			break
		}
		w.buf = append(w.buf, p[:i]...)
		w.emit(w.buf)
		w.buf = w.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}

// flush logs a last line without a newline.
func (w *lineLogger) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = w.buf[:0]
	}
}

func (w *lineLogger) emit(line []byte) {
	text := strings.TrimRight(strings.ToValidUTF8(string(line), "\uFFFD"), "\r")
	if len(text) > maxStderrLine {
		text = text[:maxStderrLine]
	}
	if text == "" {
		return
	}
	w.log.Debug().Str("stderr", text).Msg("MCP server stderr")
}
