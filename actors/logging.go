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
// actors/cluster), one not listening yet (members start one after another).
// A connection that cannot be made otherwise (a TLS refusal) stays a
// warning: see refusedConnect.
var transientLevels = map[string]slog.Level{
	"EndpointWriter lost connection":                   slog.LevelInfo,
	"EndpointWriter failed to create receive stream":   slog.LevelInfo,
	"EndpointWriter failed to connect":                 slog.LevelInfo,
	"EndpointWriter got DisconnectRequest form remote": slog.LevelInfo,
	"sendGossipForMember failed":                       slog.LevelInfo,
	"Got gossip request from unknown member":           slog.LevelInfo,
	"Failed to shutdown partition placement actor":     slog.LevelInfo,
}

// failedConnect is protoactor's report of a connection to a member that
// could not be made.
const failedConnect = "EndpointWriter failed to connect"

// refusedConnect reports whether r, a failedConnect, says the member's port
// refused the connection (it is not listening: not started yet, or gone),
// rather than a handshake that failed.
func refusedConnect(r slog.Record) bool {
	refused := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" && strings.Contains(a.Value.String(), "connection refused") {
			refused = true
			return false
		}
		return true
	})
	return refused
}

// transientQuiet is a slog.Handler that lowers transientLevels' messages.
type transientQuiet struct{ next slog.Handler }

func (h transientQuiet) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h transientQuiet) Handle(ctx context.Context, r slog.Record) error {
	if l, ok := transientLevels[r.Message]; ok && r.Level > l && (r.Message != failedConnect || refusedConnect(r)) {
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
