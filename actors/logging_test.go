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
