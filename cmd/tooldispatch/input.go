package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// utf8BOM is skipped at the start of the input (editors on some systems
// write one).
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// inputError is unreadable run input: which turn and at which byte offset.
type inputError struct {
	Turn   int
	Offset int64
	Err    error
}

func (e *inputError) Error() string {
	return fmt.Sprintf("turn %d at byte %d: %v", e.Turn, e.Offset, e.Err)
}

func (e *inputError) Unwrap() error { return e.Err }

// turnReader reads turns from run input, one JSON value at a time, so a turn
// can be dispatched as soon as it has arrived: the input is a stream of JSON
// values separated by whitespace (one value, or JSON Lines), where each value
// is a turn object or an array of turn objects. Not safe for concurrent use.
type turnReader struct {
	r   *bufio.Reader
	max int

	off       int64 // bytes consumed
	n         int   // turns started
	inArray   bool  // inside a top-level array
	afterElem bool  // inside an array, after an element
	err       error // sticky: io.EOF or *inputError
	started   bool  // a leading byte-order mark has been looked for
	buf       []byte
	stack     []byte // expected closing brackets while framing
}

// newTurnReader returns a reader of the turns in r; a turn's JSON value may
// have at most maxBytes bytes.
func newTurnReader(r io.Reader, maxBytes int64) *turnReader {
	return &turnReader{r: bufio.NewReaderSize(r, 64<<10), max: int(maxBytes)}
}

// Next returns the next turn, io.EOF at the end of the input, or an
// *inputError (or a read error wrapped in one) for unreadable input. After an
// error, Next returns the same error again.
func (tr *turnReader) Next() (*inputTurn, error) {
	if tr.err != nil {
		return nil, tr.err
	}
	t, err := tr.next()
	if err != nil {
		tr.err = err
	}
	return t, err
}

func (tr *turnReader) next() (*inputTurn, error) {
	if !tr.started {
		tr.started = true
		if b, _ := tr.r.Peek(len(utf8BOM)); bytes.Equal(b, utf8BOM) {
			_, _ = tr.r.Discard(len(utf8BOM))
			tr.off += int64(len(utf8BOM))
		}
	}
	for {
		c, at, err := tr.skipSpace()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, tr.fail(tr.n+1, at, fmt.Errorf("reading input: %w", err))
		}
		eof := err != nil
		if !tr.inArray {
			if eof {
				return nil, io.EOF
			}
			if c == '[' {
				tr.inArray, tr.afterElem = true, false
				continue
			}
			return tr.value(c, at)
		}
		if eof {
			return nil, tr.fail(tr.n+1, at, errors.New("unexpected end of input: the array of turns is not closed"))
		}
		if tr.afterElem {
			switch c {
			case ']':
				tr.inArray, tr.afterElem = false, false
				continue
			case ',':
				tr.afterElem = false
				c, at, err = tr.skipSpace()
				switch {
				case errors.Is(err, io.EOF):
					return nil, tr.fail(tr.n+1, at, errors.New("unexpected end of input after ','"))
				case err != nil:
					return nil, tr.fail(tr.n+1, at, fmt.Errorf("reading input: %w", err))
				case c == ']':
					return nil, tr.fail(tr.n+1, at, errors.New("expected a turn after ',', found ']'"))
				}
			default:
				return nil, tr.fail(tr.n+1, at, fmt.Errorf("expected ',' or ']' after a turn in the array, found %s", quoteByte(c)))
			}
		} else if c == ']' {
			tr.inArray = false
			continue
		}
		tr.afterElem = true
		return tr.value(c, at)
	}
}

// value reads the JSON value that starts with c at offset at, and parses it
// as a turn.
func (tr *turnReader) value(c byte, at int64) (*inputTurn, error) {
	tr.n++
	raw, err := tr.frame(c, at)
	if err != nil {
		return nil, err
	}
	t, err := parseTurn(raw, at)
	if err != nil {
		var ie *inputError
		if errors.As(err, &ie) {
			ie.Turn = tr.n
			return nil, ie
		}
		return nil, tr.fail(tr.n, at, err)
	}
	t.Index, t.Offset = tr.n, at
	return t, nil
}

func (tr *turnReader) fail(turn int, at int64, err error) error {
	return &inputError{Turn: turn, Offset: at, Err: err}
}

// readByte reads one byte and counts it.
func (tr *turnReader) readByte() (byte, error) {
	c, err := tr.r.ReadByte()
	if err == nil {
		tr.off++
	}
	return c, err
}

// skipSpace consumes JSON whitespace and returns the next byte and its
// offset; at the end of the input it returns io.EOF and the input's length.
func (tr *turnReader) skipSpace() (byte, int64, error) {
	for {
		at := tr.off
		c, err := tr.readByte()
		if err != nil {
			return 0, at, err
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c, at, nil
	}
}

// frame reads the bytes of one JSON value that starts with c at offset at.
// It only finds where the value ends (brackets, strings and escapes);
// parseTurn checks the syntax. A bracket that does not match is reported at
// once, without waiting for more input.
func (tr *turnReader) frame(c byte, at int64) ([]byte, error) {
	tr.buf = append(tr.buf[:0], c)
	tr.stack = tr.stack[:0]
	switch c {
	case '{':
		tr.stack = append(tr.stack, '}')
	case '[':
		tr.stack = append(tr.stack, ']')
	case '"':
		if err := tr.frameString(at); err != nil {
			return nil, err
		}
		return tr.buf, nil
	case '}', ']', ',', ':':
		return nil, tr.fail(tr.n, at, fmt.Errorf("invalid character %s where a turn should begin", quoteByte(c)))
	default:
		return tr.frameLiteral(at)
	}
	for len(tr.stack) > 0 {
		pos := tr.off
		b, err := tr.readByte()
		if err != nil {
			return nil, tr.readErr(at, pos, err)
		}
		tr.buf = append(tr.buf, b)
		if len(tr.buf) > tr.max {
			return nil, tr.tooBig(at)
		}
		switch b {
		case '"':
			if err := tr.frameString(at); err != nil {
				return nil, err
			}
		case '{':
			tr.stack = append(tr.stack, '}')
		case '[':
			tr.stack = append(tr.stack, ']')
		case '}', ']':
			if want := tr.stack[len(tr.stack)-1]; b != want {
				return nil, tr.fail(tr.n, pos, fmt.Errorf("invalid character %s: expected %s", quoteByte(b), quoteByte(want)))
			}
			tr.stack = tr.stack[:len(tr.stack)-1]
		}
	}
	return tr.buf, nil
}

// frameString reads the rest of a string whose opening quote is already in
// the buffer.
func (tr *turnReader) frameString(at int64) error {
	escaped := false
	for {
		pos := tr.off
		b, err := tr.readByte()
		if err != nil {
			return tr.readErr(at, pos, err)
		}
		tr.buf = append(tr.buf, b)
		if len(tr.buf) > tr.max {
			return tr.tooBig(at)
		}
		switch {
		case escaped:
			escaped = false
		case b == '\\':
			escaped = true
		case b == '"':
			return nil
		}
	}
}

// frameLiteral reads the rest of a number or literal (true, false, null),
// up to the next delimiter.
func (tr *turnReader) frameLiteral(at int64) ([]byte, error) {
	for {
		pos := tr.off
		b, err := tr.readByte()
		if errors.Is(err, io.EOF) {
			return tr.buf, nil
		}
		if err != nil {
			return nil, tr.readErr(at, pos, err)
		}
		switch b {
		case ' ', '\t', '\n', '\r', ',', ']', '}', '[', '{', '"', ':':
			_ = tr.r.UnreadByte()
			tr.off--
			return tr.buf, nil
		}
		tr.buf = append(tr.buf, b)
		if len(tr.buf) > tr.max {
			return nil, tr.tooBig(at)
		}
	}
}

func (tr *turnReader) readErr(at, pos int64, err error) error {
	if errors.Is(err, io.EOF) {
		return tr.fail(tr.n, pos, errors.New("unexpected end of input inside the turn"))
	}
	return tr.fail(tr.n, pos, fmt.Errorf("reading input: %w", err))
}

func (tr *turnReader) tooBig(at int64) error {
	return tr.fail(tr.n, at, fmt.Errorf("the turn is larger than %d bytes, the most one may take ([dispatcher] max_turn_bytes, plus 1 MiB)", tr.max))
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("'%c'", c)
	}
	return fmt.Sprintf("byte 0x%02x", c)
}
