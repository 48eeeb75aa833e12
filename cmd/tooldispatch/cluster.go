package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	tdcluster "github.com/tooldispatch/tooldispatch/actors/cluster"
	"github.com/tooldispatch/tooldispatch/cachestore"
	"github.com/tooldispatch/tooldispatch/cachestore/postgres"
)

const (
	// membershipTTL is how often static membership is checked.
	membershipTTL = time.Second
	// postgresOpenTimeout bounds connecting to the shared store at start.
	postgresOpenTimeout = 30 * time.Second
)

// clusterStore opens the shared PostgreSQL store and keeps the member's own
// Badger (local) for the 30-minute cache.
func clusterStore(o *options, local cachestore.Store, log zerolog.Logger) (cachestore.Store, error) {
	url := o.postgres
	if url == "" {
		url = os.Getenv("TOOLDISPATCH_PG_URL")
	}
	if url == "" {
		return nil, errors.New("--cluster needs --postgres URL (or $TOOLDISPATCH_PG_URL): the members share their sessions there")
	}
	ctx, cancel := context.WithTimeout(context.Background(), postgresOpenTimeout)
	defer cancel()
	pg, err := postgres.Open(ctx, postgres.Options{URL: url, Logger: log})
	if err != nil {
		return nil, err
	}
	return cachestore.Split{Store: pg, Local: local}, nil
}

// clusterOptions builds the member's cluster options from the flags: etcd
// membership with --etcd, a static member list with --peers.
func clusterOptions(o *options) (tdcluster.Options, error) {
	host, portText, err := net.SplitHostPort(o.clusterAddr)
	if err != nil {
		return tdcluster.Options{}, fmt.Errorf("--cluster-addr: %w", err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return tdcluster.Options{}, fmt.Errorf("--cluster-addr: bad port %q", portText)
	}
	co := tdcluster.Options{Name: o.clusterName, Host: host, Port: port}
	switch {
	case o.etcd != "" && o.peers != "":
		return co, errors.New("give --etcd or --peers, not both")
	case o.etcd != "":
		p, err := etcd.NewWithConfig("/tooldispatch", clientv3.Config{Endpoints: splitList(o.etcd), DialTimeout: 5 * time.Second})
		if err != nil {
			return co, fmt.Errorf("--etcd: %w", err)
		}
		co.Provider = p
	case o.peers != "":
		if o.automanagePort <= 0 {
			return co, errors.New("--peers needs --automanage-port, this member's entry in the list")
		}
		co.Provider = automanaged.NewWithConfig(membershipTTL, o.automanagePort, splitList(o.peers)...)
	default:
		return co, errors.New("--cluster needs a membership: --peers (static list) or --etcd")
	}
	return co, nil
}
