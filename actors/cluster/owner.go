package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	protocluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// directoryName is the actor each member runs to tell the others the
// address its service (HTTP API) is reached at.
const directoryName = "tooldispatch-directory"

// urlTimeout bounds asking a member for its service address.
const urlTimeout = 2 * time.Second

// Owner is where a session's grain lives.
type Owner struct {
	// Address is the owner's cluster (remote) address; "" when no member
	// can host the session (the cluster has no members yet).
	Address string
	// URL is the owner's service address as it advertised it
	// (Options.ServiceURL or Member.Advertise); "" when it advertised none
	// or could not be asked.
	URL string
	// Self reports whether this member owns the session.
	Self bool
}

// placement computes the owner of a session with the cluster's own
// placement: rendezvous hashing (disthash) over the current members, the
// same function protoactor's disthash lookup places grains with. It also
// keeps the members' service addresses, asked once from each member's
// directory actor. Safe for concurrent use.
type placement struct {
	// immutable after newPlacement
	sys *actor.ActorSystem

	rdv       atomic.Pointer[protocluster.Rendezvous] // rebuilt on each topology
	members   atomic.Pointer[protocluster.Members]    // the topology's members
	url       atomic.Pointer[string]                  // this member's service address
	forwarded atomic.Uint64                           // requests sent to a grain on another member

	mu      sync.Mutex
	urls    map[string]string // guarded by mu: member address → service address
	changed chan struct{}     // guarded by mu: closed and replaced on each topology
}

func newPlacement(sys *actor.ActorSystem, url string) *placement {
	p := &placement{sys: sys, urls: map[string]string{}, changed: make(chan struct{})}
	p.url.Store(&url)
	p.rdv.Store(protocluster.NewRendezvous())
	return p
}

// update takes a new member list: placement follows it, and the service
// addresses of members that left are forgotten.
func (p *placement) update(members protocluster.Members) {
	rdv := protocluster.NewRendezvous()
	rdv.UpdateMembers(members)
	p.rdv.Store(rdv)
	p.members.Store(&members)
	present := map[string]bool{}
	for _, m := range members {
		present[m.Address()] = true
	}
	p.mu.Lock()
	for addr := range p.urls {
		if !present[addr] {
			delete(p.urls, addr)
		}
	}
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// next returns a channel closed at the next topology.
func (p *placement) next() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// ownerAddress returns the cluster address of the member session's grain
// is placed on ("" with no members).
func (p *placement) ownerAddress(session string) string {
	return p.rdv.Load().GetByClusterIdentity(&protocluster.ClusterIdentity{Identity: session, Kind: SessionKind})
}

// owner returns where session lives, asking the owner for its service
// address the first time (bounded by ctx and urlTimeout).
func (p *placement) owner(ctx context.Context, session string) Owner {
	return p.ownerAt(ctx, session, p.ownerAddress(session))
}

// successor returns where session will live once this member has left:
// the placement over the other members.
func (p *placement) successor(ctx context.Context, session string) Owner {
	ms := p.members.Load()
	if ms == nil {
		return Owner{}
	}
	self := p.sys.Address()
	var rest protocluster.Members
	for _, m := range *ms {
		if m.Address() != self {
			rest = append(rest, m)
		}
	}
	rdv := protocluster.NewRendezvous()
	rdv.UpdateMembers(rest)
	return p.ownerAt(ctx, session, rdv.GetByClusterIdentity(&protocluster.ClusterIdentity{Identity: session, Kind: SessionKind}))
}

// ownerAt returns the member at addr as session's owner, asking it for its
// service address the first time.
func (p *placement) ownerAt(ctx context.Context, session, addr string) Owner {
	if addr == "" {
		return Owner{}
	}
	if addr == p.sys.Address() {
		return Owner{Address: addr, URL: *p.url.Load(), Self: true}
	}
	p.mu.Lock()
	url, ok := p.urls[addr]
	p.mu.Unlock()
	if ok {
		return Owner{Address: addr, URL: url}
	}
	timeout := urlTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(dl), time.Millisecond))
	}
	res, err := p.sys.Root.RequestFuture(actor.NewPID(addr, directoryName), &emptypb.Empty{}, timeout).Result()
	if sv, ok := res.(*wrapperspb.StringValue); ok && err == nil && sv.Value != "" {
		url = sv.Value
		p.mu.Lock()
		// Only while the member is still a member: one that left in the
		// meantime is not remembered.
		if p.isMember(addr) {
			p.urls[addr] = url
		}
		p.mu.Unlock()
	}
	return Owner{Address: addr, URL: url}
}

// directory is the actor answering a member's service address.
func (p *placement) directory() *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*emptypb.Empty); ok && ctx.Sender() != nil {
			ctx.Respond(wrapperspb.String(*p.url.Load()))
		}
	})
}

// isMember reports whether addr is in the topology.
func (p *placement) isMember(addr string) bool {
	if ms := p.members.Load(); ms != nil {
		for _, m := range *ms {
			if m.Address() == addr {
				return true
			}
		}
	}
	return false
}
