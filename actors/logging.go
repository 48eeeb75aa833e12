package actors

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
)

// NewActorSystem returns an actor system whose own logs go through logger at
// warning level and above (protoactor logs whole messages at lower levels).
func NewActorSystem(logger zerolog.Logger) *actor.ActorSystem {
	l := logger.With().Str("component", "protoactor").Logger().Level(zerolog.WarnLevel)
	h := zerolog.NewSlogHandler(l)
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(h)
	}))
}
