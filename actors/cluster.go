package actors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/proto"

	"github.com/tooldispatch/tooldispatch/messages"
)

// SessionKind is the cluster kind of session grains.
const SessionKind = "session"

// eventRelayName is the actor each member runs to take events of sessions
// hosted elsewhere to its own event sink.
const eventRelayName = "tooldispatch-events"

// ClusterOptions configures a cluster member.
type ClusterOptions struct {
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
	Provider cluster.ClusterProvider
}

// Validate names the first bad field.
func (o *ClusterOptions) Validate() error {
	switch {
	case o.Name == "":
		return errors.New("actors: ClusterOptions.Name is required")
	case o.Host == "":
		return errors.New("actors: ClusterOptions.Host is required")
	case o.Provider == nil:
		return errors.New("actors: ClusterOptions.Provider is required")
	}
	return nil
}

// NewClusterMember starts a dispatcher that is a member of a protoactor
// cluster: sessions are grains of kind "session" keyed by session id
// (disthash), each hosting that session's commit actor and run state and
// reloading it from cfg.Store on activation. Any member takes any request
// and routes it to the session's grain. cfg.Store must be shared by the
// members (PostgreSQL) and reject a stale writer; cfg.Events receives the
// events of every session, wherever its grain runs. Close leaves the
// cluster.
func NewClusterMember(cfg Config, co ClusterOptions) (*Dispatcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := co.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.board = newQuestionBoard()
	sys := NewActorSystem(cfg.Logger)

	// Events of grains hosted here go to the local sink and to every other
	// member's relay; the relay hands them to its member's sink.
	local := cfg.Events
	members := new(atomic.Pointer[[]string])
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
	cfg.member = true
	grainCfg := cfg
	kind := cluster.NewKind(SessionKind, actor.PropsFromProducer(func() actor.Actor {
		return newSessionActor(grainCfg, "")
	}, actor.WithSupervisor(sessionSupervisor)))
	opts := []remote.ConfigOption{}
	if co.AdvertisedHost != "" {
		opts = append(opts, remote.WithAdvertisedHost(co.AdvertisedHost))
	}
	rc := remote.Configure(co.Host, co.Port, opts...)
	cc := cluster.Configure(co.Name, co.Provider, disthash.New(), rc,
		cluster.WithKinds(kind), cluster.WithRequestTimeout(requestTimeout))
	c := cluster.New(sys, cc)
	relay := actor.PropsFromFunc(func(ctx actor.Context) {
		if e, ok := ctx.Message().(*messages.Event); ok && local != nil {
			local(e)
		}
	})
	if _, err := sys.Root.SpawnNamed(relay, eventRelayName); err != nil {
		sys.Shutdown()
		return nil, fmt.Errorf("starting the event relay: %w", err)
	}
	// Follow the membership from before the member starts, so the first
	// topology is not missed, then seed it from the member list.
	sub := sys.EventStream.Subscribe(func(evt any) {
		if t, ok := evt.(*cluster.ClusterTopology); ok {
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
	d := &Dispatcher{root: sys.Root, cfg: cfg, cancels: map[uint64]func(){}, system: sys, cluster: c, members: members,
		stopCluster: func() {
			sys.EventStream.Unsubscribe(sub)
			c.Shutdown(true)
		}}
	return d, nil
}

// Member is the address of this cluster member ("" outside a cluster).
func (d *Dispatcher) Member() string {
	if d.cluster == nil {
		return ""
	}
	return d.system.Address()
}

// clusterRequest sends msg to the grain of session and waits for its reply.
func (d *Dispatcher) clusterRequest(ctx context.Context, session string, msg any) (any, error) {
	timeout := requestTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	return d.cluster.Request(session, SessionKind, msg, cluster.WithTimeout(timeout))
}

// clusterDispatch runs a turn on the session's grain, wherever it is.
func (d *Dispatcher) clusterDispatch(ctx context.Context, t *messages.DispatchTurn, id uint64) (any, error) {
	wire := proto.Clone(t).(*messages.DispatchTurn)
	wire.RequestId = d.system.Address() + "/" + strconv.FormatUint(id, 10)
	for attempt := 0; ; attempt++ {
		pid := d.cluster.Get(t.Session, SessionKind)
		if pid == nil {
			if attempt >= grainAttempts {
				return nil, fmt.Errorf("no member can host session %q", t.Session)
			}
			time.Sleep(grainRetryDelay)
			continue
		}
		res, err := d.awaitGrain(ctx, pid, wire)
		if _, dead := res.(*actor.DeadLetterResponse); dead && attempt < grainAttempts {
			// The grain moved or passivated before it took the turn:
			// nothing ran, ask again.
			d.cluster.PidCache.Remove(t.Session, SessionKind)
			time.Sleep(grainRetryDelay)
			continue
		}
		return res, err
	}
}

// Grain requests.
const (
	grainAttempts   = 5
	grainRetryDelay = 200 * time.Millisecond
	// memberCheck is how often a running turn checks that the member
	// hosting its grain is still in the cluster.
	memberCheck = 500 * time.Millisecond
)

// errMemberLeft: the member running a turn left the cluster before
// answering.
var errMemberLeft = errors.New("the cluster member running the turn left the cluster; calls that may have started read outcome_unknown once the session is loaded again")

// awaitGrain sends a turn to a grain and waits for the reply, the caller's
// cancellation (passed on to the turn), or the grain's member leaving the
// cluster.
func (d *Dispatcher) awaitGrain(ctx context.Context, pid *actor.PID, wire *messages.DispatchTurn) (any, error) {
	f := d.root.RequestFuture(pid, wire, requestTimeout)
	type reply struct {
		res any
		err error
	}
	done := make(chan reply, 1)
	go func() {
		res, err := f.Result()
		done <- reply{res, err}
	}()
	tick := time.NewTicker(memberCheck)
	defer tick.Stop()
	canceled := ctx.Done()
	for {
		select {
		case r := <-done:
			return r.res, r.err
		case <-canceled:
			canceled = nil
			d.root.Send(pid, &messages.CancelTurn{Session: wire.Session, RequestId: wire.RequestId})
		case <-tick.C:
			if !d.isMember(pid.Address) {
				return nil, errMemberLeft
			}
		}
	}
}

// isMember reports whether addr is a member of the cluster now.
func (d *Dispatcher) isMember(addr string) bool {
	if addr == d.system.Address() {
		return true
	}
	ms := d.members.Load()
	if ms == nil {
		return true
	}
	for _, m := range *ms {
		if m == addr {
			return true
		}
	}
	return false
}
