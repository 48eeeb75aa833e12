package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/tooldispatch/tooldispatch/messages"
)

// fakeDispatcher records confirmations and answers each with status.
type fakeDispatcher struct {
	status  string
	replies chan *messages.ConfirmReply
}

func newFakeDispatcher(status string) *fakeDispatcher {
	return &fakeDispatcher{status: status, replies: make(chan *messages.ConfirmReply, 16)}
}

func (f *fakeDispatcher) Confirm(_ context.Context, r *messages.ConfirmReply) (*messages.ConfirmAck, error) {
	f.replies <- r
	return &messages.ConfirmAck{Status: f.status}, nil
}

func confirmEvent(callID, tool string) *messages.Event {
	return &messages.Event{Kind: "tool_confirm", Session: "s1", CallId: callID, Tool: tool, ArgsHash: "hash-" + callID,
		Arguments: `{"path":"notes.md"}`, Text: "Allow " + tool + " to run with these arguments? It is not read-only."}
}

func TestPrompterAnswers(t *testing.T) {
	tests := []struct {
		name     string
		answers  string
		ack      string
		want     []bool
		wantText []string
	}{
		{
			name:     "yes and no",
			answers:  "y\nno\n",
			ack:      "accepted",
			want:     []bool{true, false},
			wantText: []string{"edit_file (call c1, session s1)", `{"path":"notes.md"}`, "It is not read-only. [y/N]", "denied"},
		},
		{
			name:    "YES in capitals, then anything else is no",
			answers: " YES \nsure\n",
			ack:     "accepted",
			want:    []bool{true, false},
		},
		{
			name:     "the end of the input denies this and every later question",
			answers:  "",
			ack:      "accepted",
			want:     []bool{false, false},
			wantText: []string{"no answer (EOF): denied", "no more answers can be read: denied"},
		},
		{
			name:    "a last line without newline counts",
			answers: "y",
			ack:     "accepted",
			want:    []bool{true, false},
		},
		{
			name:     "an answer that comes too late is reported",
			answers:  "y\ny\n",
			ack:      "not_found",
			want:     []bool{true, true},
			wantText: []string{"the answer came too late: the call was already decided (not_found)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out lockedBuffer
			fd := newFakeDispatcher(tt.ack)
			p := newPrompter(strings.NewReader(tt.answers), &out, nil)
			p.Ask(confirmEvent("c1", "edit_file"))
			p.Ask(confirmEvent("c2", "run_command"))
			p.Start(fd.Confirm)
			var got []*messages.ConfirmReply
			for range tt.want {
				got = append(got, <-fd.replies)
			}
			p.Close()
			var want []*messages.ConfirmReply
			for i, a := range tt.want {
				id := []string{"c1", "c2"}[i]
				want = append(want, &messages.ConfirmReply{Session: "s1", CallId: id, ArgsHash: "hash-" + id, Approve: a})
			}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("replies (-want +got):\n%s", diff)
			}
			for _, s := range tt.wantText {
				if !strings.Contains(out.String(), s) {
					t.Errorf("prompt output does not contain %q:\n%s", s, out.String())
				}
			}
		})
	}
}

// TestPrompterCloseInterruptsAWait checks that Close ends a prompter that
// waits for an answer, when it was given the source's closer.
func TestPrompterCloseInterruptsAWait(t *testing.T) {
	r, w := io.Pipe()
	defer w.Close()
	prompted := make(chan struct{})
	out := &signalWriter{marker: "[y/N]", seen: prompted}
	fd := newFakeDispatcher("accepted")
	p := newPrompter(r, out, r)
	p.Start(fd.Confirm)
	p.Ask(confirmEvent("c1", "edit_file"))
	<-prompted
	p.Close()
	select {
	case r := <-fd.replies:
		t.Fatalf("a reply was sent after Close: %v", r)
	default:
	}
}

// TestPrompterCloseWithoutStart: a prompter closed before it started asks
// nothing, and Close still closes the answer source it was given.
func TestPrompterCloseWithoutStart(t *testing.T) {
	var out lockedBuffer
	src := &closeCounter{Reader: strings.NewReader("y\n")}
	p := newPrompter(src, &out, src)
	p.Ask(confirmEvent("c1", "edit_file"))
	p.Close()
	if src.closed != 1 {
		t.Errorf("the answer source was closed %d times, want once", src.closed)
	}
	if s := out.String(); s != "" {
		t.Errorf("a prompter that never started wrote %q", s)
	}
}

// closeCounter is an answer source that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// signalWriter closes seen the first time marker is written.
type signalWriter struct {
	lockedBuffer
	marker string
	seen   chan struct{}
	once   bool
}

func (s *signalWriter) Write(p []byte) (int, error) {
	n, err := s.lockedBuffer.Write(p)
	s.mu.Lock()
	if !s.once && strings.Contains(string(p), s.marker) {
		s.once = true
		close(s.seen)
	}
	s.mu.Unlock()
	return n, err
}

func TestPrintable(t *testing.T) {
	tests := []struct {
		name, in string
		limit    int
		want     string
	}{
		{name: "plain", in: `{"path":"ünïcode.md"}`, limit: 100, want: `{"path":"ünïcode.md"}`},
		{name: "escape sequence", in: "a\x1b[2Jb\r\n", limit: 100, want: `a\u001b[2Jb\u000d\u000a`},
		{name: "C1 control and bidi override", in: "x\u009b\u202ey", limit: 100, want: `x\u009b\u202ey`},
		{name: "invalid UTF-8", in: "a\xffb", limit: 100, want: `a\ufffdb`},
		{name: "cut", in: strings.Repeat("a", 10), limit: 4, want: "aaaa… (6 more bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := printable(tt.in, tt.limit); got != tt.want {
				t.Errorf("printable(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
