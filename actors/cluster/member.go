package cluster

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"

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
	// requestTimeout bounds how long a request waits for a grain; turns
	// end far sooner (each call has its own timeout).
	requestTimeout  = 24 * time.Hour
	grainAttempts   = 5
	grainRetryDelay = 200 * time.Millisecond
	// memberCheck is how often a running turn checks that the member
	// hosting its grain is still in the cluster.
	memberCheck = 500 * time.Millisecond
)

// errMemberLeft: the member running a turn left the cluster before
// answering.
var errMemberLeft = errors.New("the cluster member running the turn left the cluster; calls that may have started read outcome_unknown once the session is loaded again")

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
	if err := co.Validate(); err != nil {
		return nil, err
	}
	sys := actors.NewActorSystem(cfg.Logger)
	members := new(atomic.Pointer[[]string])
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
		return start(sys, co, sessions, local, members)
	})
	if err != nil {
		sys.Shutdown()
		return nil, err
	}
	return d, nil
}

// start joins the cluster with session grains of the given props.
func start(sys *actor.ActorSystem, co Options, sessions *actor.Props, local func(*messages.Event),
	members *atomic.Pointer[[]string]) (*router, error) {
	var opts []remote.ConfigOption
	if co.AdvertisedHost != "" {
		opts = append(opts, remote.WithAdvertisedHost(co.AdvertisedHost))
	}
	rc := remote.Configure(co.Host, co.Port, opts...)
	cc := protocluster.Configure(co.Name, co.Provider, disthash.New(), rc,
		protocluster.WithKinds(protocluster.NewKind(SessionKind, sessions)), protocluster.WithRequestTimeout(requestTimeout))
	c := protocluster.New(sys, cc)
	relay := actor.PropsFromFunc(func(ctx actor.Context) {
		if e, ok := ctx.Message().(*messages.Event); ok && local != nil {
			local(e)
		}
	})
	if _, err := sys.Root.SpawnNamed(relay, eventRelayName); err != nil {
		return nil, fmt.Errorf("starting the event relay: %w", err)
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
		}
	})
	c.StartMember()
	if members.Load() == nil {
		var addrs []string
		for _, m := range c.MemberList.Members().Members() {
			addrs = append(addrs, m.Address())
		}
		members.CompareAndSwap(nil, &addrs)
	}
	return &router{sys: sys, c: c, members: members, stop: func() {
		sys.EventStream.Unsubscribe(sub)
		c.Shutdown(true)
	}}, nil
}
