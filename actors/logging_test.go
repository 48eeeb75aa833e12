package actors

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestRefusedConnectionIsNotAWarning: a member whose port refuses a
// connection (not started yet, or gone) is a passing state, logged below
// warning, and so is a handshake the peer cut off on the first attempt (a
// member that exits mid-handshake in a rolling restart: TestClusterRunbook
// once failed on "ERR EndpointWriter failed to connect … authentication
// handshake failed: … connection reset by peer"); a connection that fails
// otherwise (a TLS refusal), or is cut off again on the next attempt two
// seconds later (not a restart: a peer that is not a member's TLS port),
// stays at protoactor's level (error).
func TestRefusedConnectionIsNotAWarning(t *testing.T) {
	var buf bytes.Buffer
	l := zerolog.New(&buf).Level(zerolog.WarnLevel)
	h := transientQuiet{zerolog.NewSlogHandler(l)}
	const (
		refused = `rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:8802: connect: connection refused"`
		badCert = `rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: tls: bad certificate"`
		reset   = `rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: read tcp 127.0.0.1:41516->127.0.0.1:8802: read: connection reset by peer"`
		eof     = `rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: EOF"`
		// The peer ended the connection before its connect response.
		closed = `rpc error: code = Unavailable desc = error reading from server: EOF`
	)
	for _, tc := range []struct {
		err   string
		retry int
		logs  bool
	}{
		{refused, 0, false},
		{refused, 3, false},
		{badCert, 0, true},
		{reset, 0, false},
		{eof, 0, false},
		{reset, 1, true},
		{eof, 4, true},
		{closed, 0, false},
		{closed, 1, true},
	} {
		buf.Reset()
		r := slog.NewRecord(time.Now(), slog.LevelError, failedConnect, 0)
		r.AddAttrs(slog.String("address", "127.0.0.1:8802"), slog.Any("error", errors.New(tc.err)), slog.Int("retry", tc.retry))
		if err := h.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(buf.String(), failedConnect); got != tc.logs {
			t.Errorf("%s (retry %d): logged at warning level or above = %v, want %v (%q)", tc.err, tc.retry, got, tc.logs, buf.String())
		}
	}
}

// TestConnectSetupStepsLogBelowWarning: protoactor reports a failed step of
// a connection's setup (the receive stream, the connect request, its
// response) and then the failed connection itself, with the same error and
// the attempt number; the step is logged below warning (the second report
// carries the level: TestRefusedConnectionIsNotAWarning). TestClusterRunbook
// failed once on 'ERR EndpointWriter failed to receive connect response
// error="rpc error: code = Unavailable desc = error reading from server:
// EOF"', a member exiting as its peer connected.
func TestConnectSetupStepsLogBelowWarning(t *testing.T) {
	var buf bytes.Buffer
	l := zerolog.New(&buf).Level(zerolog.WarnLevel)
	h := transientQuiet{zerolog.NewSlogHandler(l)}
	for _, msg := range []string{"EndpointWriter failed to create receive stream", "EndpointWriter failed to send connect request",
		"EndpointWriter failed to receive connect response"} {
		buf.Reset()
		r := slog.NewRecord(time.Now(), slog.LevelError, msg, 0)
		r.AddAttrs(slog.String("address", "127.0.0.1:8802"), slog.Any("error", errors.New(`rpc error: code = Unavailable desc = error reading from server: EOF`)))
		if err := h.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: logged at warning level or above: %q", msg, buf.String())
		}
	}
}
