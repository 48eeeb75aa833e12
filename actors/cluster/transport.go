package cluster

import (
	"math"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// transportOptions are the gRPC options of the cluster transport. gRPC
// refuses a received message over 4 MiB by default, and protoactor sends
// its messages to a member in batches; a turn within the turn limit
// (actors.Config.MaxTurnBytes, 64 MiB of arguments by default), its reply,
// or a batch of them would be refused, the connection dropped and the
// request left waiting. So a member takes messages up to gRPC's own bound
// (2 GiB); how much a member lets in at once is bounded where turns enter
// (the service's in-flight budget). protoactor's default dial option
// (plaintext) is given again: WithDialOptions replaces it.
func transportOptions() []remote.ConfigOption {
	return []remote.ConfigOption{
		remote.WithServerOptions(grpc.MaxRecvMsgSize(math.MaxInt32)),
		remote.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32))),
	}
}
