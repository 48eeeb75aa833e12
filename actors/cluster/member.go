package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/tooldispatch/tooldispatch/actors"
	"github.com/tooldispatch/tooldispatch/messages"
)

// SessionKind is the cluster kind of session grains.
const SessionKind = "session"

// eventRelayName is the actor each member runs to take events of sessions
// hosted elsewhere to its own event sink.
const eventRelayName = "tooldispatch-events"

// Grain requests.
const (
	grainAttempts   = 5
	grainRetryDelay = 200 * time.Millisecond
	// untakenWindow is how long a turn that a grain did not take (it was
	// stopping, or its member drains: see actors.Dispatcher.Close) is
	// asked again, every untakenRetryDelay; a member's --grace longer
	// than this makes turns forwarded to it fail (503) instead of waiting.
	untakenWindow     = 2 * time.Minute
	untakenRetryDelay = 100 * time.Millisecond
	// memberCheck is how often a running turn checks that the member
	// hosting its grain is still in the cluster.
	memberCheck = 100 * time.Millisecond
)

// Options configures a cluster member.
type Options struct {
	// Name of the cluster; members with another name never meet.
	Name string
	// Host and Port the member's remote endpoint listens on (Port 0: any).
	Host string
	Port int
	// AdvertisedHost is the address other members reach this one at, when
	// it differs from Host.
	AdvertisedHost string
	// Provider is the membership provider: protoactor's etcd provider, or
	// its automanaged provider for a static member list.
	Provider protocluster.ClusterProvider
	// TLS is the members' mutual TLS (LoadTLS): the remote transport
	// (grains, gossip, events, the directory) accepts and dials only
	// connections whose certificate the cluster's CA signed. Nil runs the
	// transport in the clear, which only a cluster on one machine's
	// loopback may do.
	TLS *TLS
	// Logger gets the member's membership changes.
	Logger zerolog.Logger
	// ServiceURL is the address this member's service (HTTP API) is
	// reached at, told to the other members so that they can name the
	// owner of a session to a client (Member.Owner). May be set later
	// with Member.Advertise; "" advertises none.
	ServiceURL string
}

// Validate names the first bad field.
func (o *Options) Validate() error {
	switch {
	case o.Name == "":
		return errors.New("cluster: Options.Name is required")
	case o.Host == "":
		return errors.New("cluster: Options.Host is required")
	case o.Provider == nil:
		return errors.New("cluster: Options.Provider is required")
	}
	return nil
}

// NewMember starts a dispatcher that is a member of a protoactor cluster:
// sessions are grains of kind "session" keyed by session id (disthash), each
// hosting that session's commit actor and run state and reloading it from
// cfg.Store on activation. Any member takes any request and routes it to
// the session's grain. cfg.Store is the caller's: it must be shared by the
// members and reject a stale writer (PostgreSQL). cfg.Events receives the
// events of every session, wherever its grain runs. Close leaves the
// cluster.
func NewMember(cfg actors.Config, co Options) (*actors.Dispatcher, error) {
	m, err := Join(cfg, co)
	if err != nil {
		return nil, err
	}
	return m.Dispatcher, nil
}

// Member is a dispatcher that is a cluster member, with the placement of
// the sessions over the members. Its methods are safe for concurrent use.
type Member struct {
	// Dispatcher takes the member's requests; Close leaves the cluster.
	Dispatcher *actors.Dispatcher
	p          *placement
}

// Join starts a cluster member as NewMember does and returns it with the
// placement of sessions, which tells where a session lives.
func Join(cfg actors.Config, co Options) (*Member, error) {
	if err := co.Validate(); err != nil {
		closeUnstarted(co.Provider)
		return nil, err
	}
	sys := actors.NewActorSystem(cfg.Logger)
	members := new(atomic.Pointer[[]string])
	p := newPlacement(sys, co.ServiceURL)
	// Events of grains hosted here go to the local sink and to every other
	// member's relay; the relay hands them to its member's sink.
	local := cfg.Events
	if local != nil {
		cfg.Events = func(e *messages.Event) {
			local(e)
			if ms := members.Load(); ms != nil {
				self := sys.Address()
				for _, addr := range *ms {
					if addr != self {
						sys.Root.Send(actor.NewPID(addr, eventRelayName), e)
					}
				}
			}
		}
	}
	d, err := actors.NewRouted(sys, cfg, func(sessions *actor.Props) (actors.Router, error) {
		return start(sys, co, sessions, local, members, p)
	})
	if err != nil {
		closeUnstarted(co.Provider)
		sys.Shutdown()
		return nil, err
	}
	return &Member{Dispatcher: d, p: p}, nil
}

// closeUnstarted closes a static member list whose member never started
// (its membership port is open from NewStatic on).
func closeUnstarted(p protocluster.ClusterProvider) {
	if s, ok := p.(*Static); ok {
		_ = s.Shutdown(false)
	}
}

// Owner returns where session's grain lives now: the member the cluster's
// placement (disthash over the current members) puts it on, with the
// service address that member advertised. The owner's address is asked
// once per member, bounded by ctx.
func (m *Member) Owner(ctx context.Context, session string) Owner {
	return m.p.owner(ctx, session)
}

// Successor returns where session's grain will live once this member has
// left the cluster (the placement over the other members): a member that
// drains names it to clients.
func (m *Member) Successor(ctx context.Context, session string) Owner {
	return m.p.successor(ctx, session)
}

// Advertise sets the service address this member tells the others (see
// Options.ServiceURL), e.g. once its HTTP listener has a port.
func (m *Member) Advertise(url string) { m.p.url.Store(&url) }

// Forwarded counts the requests this member sent to a session grain hosted
// on another member: each is a round trip between members.
func (m *Member) Forwarded() uint64 { return m.p.forwarded.Load() }

// start joins the cluster with session grains of the given props.
func start(sys *actor.ActorSystem, co Options, sessions *actor.Props, local func(*messages.Event),
	members *atomic.Pointer[[]string], p *placement) (*router, error) {
	opts := transportOptions()
	if co.AdvertisedHost != "" {
		opts = append(opts, remote.WithAdvertisedHost(co.AdvertisedHost))
	}
	if co.TLS != nil {
		opts = append(opts,
			remote.WithServerOptions(grpc.Creds(credentials.NewTLS(co.TLS.Server))),
			remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(co.TLS.Client))))
	}
	rc := remote.Configure(co.Host, co.Port, opts...)
	cc := protocluster.Configure(co.Name, co.Provider, disthash.New(), rc,
		protocluster.WithKinds(protocluster.NewKind(SessionKind, sessions)), protocluster.WithRequestTimeout(actors.RequestTimeout))
	c := protocluster.New(sys, cc)
	relay := actor.PropsFromFunc(func(ctx actor.Context) {
		if e, ok := ctx.Message().(*messages.Event); ok && local != nil {
			local(e)
		}
	})
	relayPID, err := sys.Root.SpawnNamed(relay, eventRelayName)
	if err != nil {
		return nil, fmt.Errorf("starting the event relay: %w", err)
	}
	dirPID, err := sys.Root.SpawnNamed(p.directory(), directoryName)
	if err != nil {
		return nil, fmt.Errorf("starting the directory: %w", err)
	}
	// Follow the membership from before the member starts, so the first
	// topology is not missed, then seed it from the member list.
	sub := sys.EventStream.Subscribe(func(evt any) {
		if t, ok := evt.(*protocluster.ClusterTopology); ok {
			addrs := make([]string, 0, len(t.Members))
			for _, m := range t.Members {
				addrs = append(addrs, m.Address())
			}
			members.Store(&addrs)
			p.update(t.Members)
		}
	})
	c.StartMember()
	stopWatching := watchLiveness(c, co.Logger)
	if members.Load() == nil {
		var addrs []string
		current := c.MemberList.Members().Members()
		for _, m := range current {
			addrs = append(addrs, m.Address())
		}
		if members.CompareAndSwap(nil, &addrs) {
			p.update(current)
		}
	}
	return &router{sys: sys, c: c, members: members, p: p, log: co.Logger, stop: func() error {
		sys.EventStream.Unsubscribe(sub)
		stopWatching()
		return leave(c, relayPID, dirPID)
	}}, nil
}

// leave takes a member out of the cluster in protoactor's order (its top
// actors poisoned and waited for before anything is shut down; the actor
// system itself is the Dispatcher's to shut down, once): it tells the
// others it leaves (gossip) and leaves the membership (static: its
// membership port closes, so the others drop it at their next check;
// etcd: its key is deleted), so that the session's next owner activates
// its grains at once; then its grains stop (passivated: their state is in
// the store), then its own actors, gossip and the transport. Unlike
// protoactor's Cluster.Shutdown it neither sleeps 2 s nor shuts the actor
// system down itself.
func leave(c *protocluster.Cluster, own ...*actor.PID) error {
	c.Gossip.SetState(protocluster.GracefullyLeftKey, &emptypb.Empty{})
	err := c.Config.ClusterProvider.Shutdown(true)
	c.IdentityLookup.Shutdown()
	for _, pid := range own {
		_ = c.ActorSystem.Root.PoisonFuture(pid).Wait()
	}
	c.Gossip.Shutdown()
	c.Remote.Shutdown(false)
	return err
}
