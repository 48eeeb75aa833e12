package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/tooldispatch/tooldispatch/messages"
)

const (
	// confirmReplyTimeout bounds one Dispatcher.Confirm request.
	confirmReplyTimeout = 10 * time.Second
	// maxShownArguments is how much of the arguments a prompt shows.
	maxShownArguments = 4000
	// maxShownDiffLines is how many lines of a preview's diff a prompt
	// shows.
	maxShownDiffLines = 200
)

// isTerminal reports whether f is a terminal. It goes through SyscallConn,
// which, unlike Fd, leaves the file's blocking mode alone (so Close still
// interrupts a Read of a terminal).
func isTerminal(f *os.File) bool {
	sc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = sc.Control(func(fd uintptr) {
		_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
		ok = err == nil
	})
	return ok
}

// openTTY opens the controlling terminal for reading and writing.
func openTTY() (io.ReadWriteCloser, error) {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	if !isTerminal(f) {
		f.Close()
		return nil, errors.New("/dev/tty is not a terminal")
	}
	return f, nil
}

// confirmFunc answers one confirmation: Dispatcher.Confirm.
type confirmFunc func(context.Context, *messages.ConfirmReply) (*messages.ConfirmAck, error)

// confirmRequest is what a prompt needs from a tool_confirm event.
type confirmRequest struct {
	session, callID, tool, argsHash, arguments, question string
	// diff and note preview a call that changes workspace files.
	diff, note string
}

type lineResult struct {
	text string
	err  error
}

// prompter asks a person on a terminal about tool_confirm events, one at a
// time in the order they came, reads y/N and answers the dispatcher. Ask
// never blocks, so the dispatcher's event callback may call it; the
// questions wait in a queue for the prompter's goroutine.
//
// Ask and Close are safe for concurrent use; Start is called once.
type prompter struct {
	// immutable after newPrompter
	in     io.Reader
	out    io.Writer
	closer io.Closer // closes in, interrupting a read; nil when in cannot be interrupted
	wake   chan struct{}
	lines  chan lineResult

	// set by Start
	confirm    confirmFunc
	ctx        context.Context
	cancel     context.CancelFunc
	done       chan struct{} // the prompting goroutine has ended
	readerDone chan struct{} // the line reader has ended

	// used by the prompting goroutine only
	readerStarted bool
	eof           bool

	mu    sync.Mutex
	queue []confirmRequest // guarded by mu
}

// newPrompter returns a prompter that writes questions to out and reads
// answers from in. closer, when not nil, is closed by Close to interrupt a
// pending read (the terminal the caller opened for the prompter).
func newPrompter(in io.Reader, out io.Writer, closer io.Closer) *prompter {
	return &prompter{in: in, out: out, closer: closer, wake: make(chan struct{}, 1), lines: make(chan lineResult)}
}

// Start starts prompting; answers go to confirm. Close stops it.
func (p *prompter) Start(confirm confirmFunc) {
	p.confirm = confirm
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.done = make(chan struct{})
	p.readerDone = make(chan struct{})
	go p.loop()
}

// Ask queues a question about a tool_confirm event.
func (p *prompter) Ask(ev *messages.Event) {
	p.mu.Lock()
	p.queue = append(p.queue, confirmRequest{session: ev.GetSession(), callID: ev.GetCallId(), tool: ev.GetTool(),
		argsHash: ev.GetArgsHash(), arguments: ev.GetArguments(), question: ev.GetText(), diff: ev.GetDiff(), note: ev.GetNote()})
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Close stops prompting, closes the answer source if the prompter was given
// its closer, and waits for the goroutines. A read of an answer source
// without a closer (stdin) cannot be interrupted: its reader goroutine ends
// with the read, or with the process.
func (p *prompter) Close() {
	if p.done == nil {
		if p.closer != nil {
			p.closer.Close()
		}
		return
	}
	p.cancel()
	if p.closer != nil {
		p.closer.Close()
	}
	<-p.done
	if p.readerStarted && p.closer != nil {
		<-p.readerDone
	}
}

func (p *prompter) loop() {
	defer close(p.done)
	for {
		req, ok := p.next()
		if !ok {
			return
		}
		approve, ok := p.prompt(req)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(p.ctx, confirmReplyTimeout)
		ack, err := p.confirm(ctx, &messages.ConfirmReply{Session: req.session, CallId: req.callID,
			ArgsHash: req.argsHash, Approve: approve})
		cancel()
		switch {
		case err != nil:
			fmt.Fprintf(p.out, "tooldispatch: the answer could not be delivered: %v\n", err)
		case ack.GetStatus() != "accepted":
			fmt.Fprintf(p.out, "tooldispatch: the answer came too late: the call was already decided (%s)\n", ack.GetStatus())
		}
	}
}

// next waits for the next question; false when the prompter stops.
func (p *prompter) next() (confirmRequest, bool) {
	for {
		p.mu.Lock()
		if len(p.queue) > 0 {
			req := p.queue[0]
			p.queue = p.queue[1:]
			p.mu.Unlock()
			return req, true
		}
		p.mu.Unlock()
		select {
		case <-p.wake:
		case <-p.ctx.Done():
			return confirmRequest{}, false
		}
	}
}

// prompt shows one question and reads the answer: approve is true only for
// "y" or "yes". ok is false when the prompter stopped while waiting.
func (p *prompter) prompt(req confirmRequest) (approve, ok bool) {
	question := req.question
	if question == "" {
		question = fmt.Sprintf("Allow %s to run with these arguments?", req.tool)
	}
	fmt.Fprintf(p.out, "\ntooldispatch: %s (call %s, session %s) asks to run with:\n  %s\n%s%s [y/N] ",
		printable(req.tool, 100), printable(req.callID, 100), printable(req.session, 100),
		printable(req.arguments, maxShownArguments), previewText(req.diff, req.note), printable(question, 1000))
	if p.eof {
		fmt.Fprintln(p.out, "\ntooldispatch: no more answers can be read: denied")
		return false, true
	}
	line, err := p.readLine()
	switch {
	case p.ctx.Err() != nil:
		fmt.Fprintln(p.out)
		return false, false
	case err != nil && strings.TrimSpace(line) == "":
		p.eof = true
		fmt.Fprintf(p.out, "\ntooldispatch: no answer (%v): denied\n", err)
		return false, true
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, true
	}
	fmt.Fprintln(p.out, "tooldispatch: denied")
	return false, true
}

// previewText shows a call's preview on a terminal: its diff, each line
// made printable, and its note; "" when there is none.
func previewText(diff, note string) string {
	var b strings.Builder
	if diff != "" {
		b.WriteString("  what it would change, as the files are now:\n")
		lines := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
		for i, l := range lines {
			if i == maxShownDiffLines {
				fmt.Fprintf(&b, "    … (%d more lines)\n", len(lines)-i)
				break
			}
			b.WriteString("    " + printable(l, 1000) + "\n")
		}
	}
	for _, l := range strings.Split(note, "\n") {
		if l != "" {
			b.WriteString("  note: " + printable(l, 2000) + "\n")
		}
	}
	return b.String()
}

// readLine returns the next line of the answer source, starting the line
// reader at the first call.
func (p *prompter) readLine() (string, error) {
	if !p.readerStarted {
		p.readerStarted = true
		go p.readLines()
	}
	select {
	case l := <-p.lines:
		if l.err != nil {
			p.eof = true
		}
		return l.text, l.err
	case <-p.ctx.Done():
		return "", p.ctx.Err()
	}
}

// readLines reads answer lines and hands them to readLine, one at a time.
func (p *prompter) readLines() {
	defer close(p.readerDone)
	br := bufio.NewReader(p.in)
	for {
		s, err := br.ReadString('\n')
		if err != nil && s != "" {
			// A last line without a newline is an answer too.
			select {
			case p.lines <- lineResult{text: s}:
			case <-p.ctx.Done():
				return
			}
			s = ""
		}
		select {
		case p.lines <- lineResult{text: s, err: err}:
		case <-p.ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// printable makes text from a model safe to show on a terminal: control and
// other non-printing characters are escaped (no escape sequence reaches the
// terminal), and text longer than limit bytes is cut.
func printable(s string, limit int) string {
	var b strings.Builder
	for i, r := range s {
		if b.Len() >= limit {
			fmt.Fprintf(&b, "… (%d more bytes)", len(s)-i)
			break
		}
		switch {
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		case r == ' ' || unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	return b.String()
}
