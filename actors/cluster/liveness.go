package cluster

import (
	"errors"
	"net"
	"syscall"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/rs/zerolog"
)

const (
	// probeTimeout bounds the connection attempt that checks a member
	// whose connection broke.
	probeTimeout = 500 * time.Millisecond
	// probeEvery is how often a request waiting on another member checks
	// that member's port (a death that broke no connection of ours).
	probeEvery = 300 * time.Millisecond
)

// watchLiveness drops a member from the cluster as soon as it is known to
// be dead, without waiting for the membership provider (etcd's lease runs
// for seconds): when a connection to a member breaks, the member's
// cluster port is dialled once, and if the port refuses the connection
// (the process is gone; a stopped or cut-off process would not answer at
// all, and is left to the provider), the member's id is blocked and the
// member list recomputed. A blocked id never comes back: a member that
// restarts joins with a new one. It returns the event stream subscription's
// cancel function.
func watchLiveness(c *protocluster.Cluster, log zerolog.Logger) func() {
	sub := c.ActorSystem.EventStream.Subscribe(func(evt any) {
		t, ok := evt.(*remote.EndpointTerminatedEvent)
		if !ok || t.Address == c.ActorSystem.Address() {
			return
		}
		go probe(c, t.Address, log)
	})
	return func() { c.ActorSystem.EventStream.Unsubscribe(sub) }
}

// probe drops the member at addr when its port refuses connections.
func probe(c *protocluster.Cluster, addr string, log zerolog.Logger) {
	var dead *protocluster.Member
	for _, m := range c.MemberList.Members().Members() {
		if m.Address() == addr {
			dead = m
		}
	}
	if dead == nil {
		return // not a member (any more)
	}
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err == nil {
		conn.Close()
		return
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return
	}
	log.Info().Str("member", addr).Msg("cluster member gone: its cluster port refuses connections; its sessions move to the others")
	c.Remote.BlockList().Block(dead.Id)
	c.MemberList.UpdateClusterTopology(c.MemberList.Members().Members())
}
