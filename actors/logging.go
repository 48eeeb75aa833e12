package actors

import (
	"context"
	"log/slog"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
)

// NewActorSystem returns an actor system whose own logs go through logger at
// warning level and above (protoactor logs whole messages at lower levels).
// protoactor's reports of connections between cluster members coming and
// going, which a member leaving or joining causes every time, are kept
// below that (see transientLevels): the cluster logs membership changes
// itself.
func NewActorSystem(logger zerolog.Logger) *actor.ActorSystem {
	l := logger.With().Str("component", "protoactor").Logger().Level(zerolog.WarnLevel)
	h := transientQuiet{zerolog.NewSlogHandler(l)}
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(h)
	}))
}

// transientLevels caps the level of protoactor messages that report a
// passing state of the connections between members: a peer that leaves
// (its connection ends), one that starts (gossip reaches it before it
// knows the members), one that died (dropped at once: see
// actors/cluster), one not listening yet (members start one after another)
// or gone while the connection was being set up, once. A connection that
// cannot be made otherwise (a TLS refusal) keeps its level: see
// passingConnect. A failed step of a connection's setup (the receive
// stream, the connect request, its response) is always followed by
// failedConnect with the same error and the attempt number, which carries
// the level.
var transientLevels = map[string]slog.Level{
	"EndpointWriter lost connection":                    slog.LevelInfo,
	"EndpointWriter failed to create receive stream":    slog.LevelInfo,
	"EndpointWriter failed to send connect request":     slog.LevelInfo,
	"EndpointWriter failed to receive connect response": slog.LevelInfo,
	"EndpointWriter failed to connect":                  slog.LevelInfo,
	"EndpointWriter got DisconnectRequest form remote":  slog.LevelInfo,
	"sendGossipForMember failed":                        slog.LevelInfo,
	"Got gossip request from unknown member":            slog.LevelInfo,
	"Failed to shutdown partition placement actor":      slog.LevelInfo,
}

// failedConnect is protoactor's report of a connection to a member that
// could not be made.
const failedConnect = "EndpointWriter failed to connect"

// passingConnect reports whether r, a failedConnect, tells of a member
// that is not there for now rather than of one that cannot be reached: its
// port refused the connection (not listening: not started yet, or gone),
// or, on the first attempt, it ended the connection while it was being set
// up (a reset or an end of stream, in the TLS handshake or before the
// connect response: a member exits as its peer connects, in a rolling
// restart). protoactor tries again two seconds later; a connection cut off
// again then is no restart (a peer that is not a member's TLS port, say)
// and keeps protoactor's level, as does every connection that fails
// otherwise (a TLS refusal).
func passingConnect(r slog.Record) bool {
	var msg string
	retry := int64(-1)
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "error":
			msg = a.Value.String()
		case "retry":
			if a.Value.Kind() == slog.KindInt64 {
				retry = a.Value.Int64()
			}
		}
		return true
	})
	if strings.Contains(msg, "connection refused") {
		return true
	}
	cutOff := strings.Contains(msg, "connection reset by peer") || strings.HasSuffix(strings.TrimSuffix(msg, `"`), ": EOF")
	return cutOff && retry == 0
}

// transientQuiet is a slog.Handler that lowers transientLevels' messages.
type transientQuiet struct{ next slog.Handler }

func (h transientQuiet) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h transientQuiet) Handle(ctx context.Context, r slog.Record) error {
	if l, ok := transientLevels[r.Message]; ok && r.Level > l && (r.Message != failedConnect || passingConnect(r)) {
		r.Level = l
		if !h.next.Enabled(ctx, l) {
			return nil
		}
	}
	return h.next.Handle(ctx, r)
}

func (h transientQuiet) WithAttrs(a []slog.Attr) slog.Handler {
	return transientQuiet{h.next.WithAttrs(a)}
}

func (h transientQuiet) WithGroup(name string) slog.Handler {
	return transientQuiet{h.next.WithGroup(name)}
}
