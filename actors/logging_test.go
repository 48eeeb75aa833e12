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
// warning; a connection that fails otherwise (a TLS refusal) stays a
// warning.
func TestRefusedConnectionIsNotAWarning(t *testing.T) {
	var buf bytes.Buffer
	l := zerolog.New(&buf).Level(zerolog.WarnLevel)
	h := transientQuiet{zerolog.NewSlogHandler(l)}
	for _, tc := range []struct {
		err  string
		logs bool
	}{
		{`rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:8802: connect: connection refused"`, false},
		{`rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: tls: bad certificate"`, true},
	} {
		buf.Reset()
		r := slog.NewRecord(time.Now(), slog.LevelWarn, failedConnect, 0)
		r.AddAttrs(slog.Any("error", errors.New(tc.err)), slog.String("address", "127.0.0.1:8802"))
		if err := h.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(buf.String(), failedConnect); got != tc.logs {
			t.Errorf("%s: logged at warning level = %v, want %v (%q)", tc.err, got, tc.logs, buf.String())
		}
	}
}
